"""The papers' figures as the papers draw them (docs/figures.md).

:mod:`.registry` declares each figure once (paper, panels, job files, variables, layout, claim,
measured value); :mod:`.kunin`, :mod:`.azulay`, :mod:`.ren` draw them; :mod:`.gallery` writes
them (``richlazy figure``) and builds the paper gallery (``make paper``).
"""
