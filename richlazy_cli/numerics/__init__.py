"""The shared numerics every family builds on (docs/architecture.md): ``compute.py`` the
implementation table, devices and the torch session; ``arrays.py`` the array namespace (NumPy
or torch); ``kernel_distance.py`` the kernel distance; ``records.py`` the record grids;
``randomness.py`` the named random streams; ``solvers/`` the batched ODE integrators.
Nothing here imports a model family, the engine or anything above them.
"""
