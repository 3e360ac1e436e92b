"""Integrators of ordinary differential equations beside SciPy's (docs/engine.md, "Solvers").

:mod:`.runge_kutta`: batched embedded Runge–Kutta pairs (Dormand–Prince 5(4), Bogacki–Shampine
3(2)) on torch devices, the tableau as data and the step-size control written once.
:mod:`.krylov`: a stiff solver, CVODE's BDF with a matrix-free Newton–GMRES solve on a
Jacobian–vector product (docs/hermite.md, "Integrators").
:mod:`.switching`: SciPy's RK45 while its steps are set by accuracy, that CVODE while they are
set by stability, switched by a power-iteration estimate of the Jacobian's spectral radius.
"""
