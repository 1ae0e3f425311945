"""Selected-region contracts of the plan's kernels, one TOML file per plan kernel name.

`bitcase verify` reads ``<kernel>.toml`` for each sealed-plan entry; the format is documented in
``docs/verifier.md``. A package only so the files ship as package data.
"""
