"""The workflow's logic, importable and testable without Snakemake.

Read by the Snakefile (``workflow/rules/common.smk`` puts this folder's parent on the
import path) and by the jobs (Snakemake puts a ``script:``'s folder on its import
path, in every software environment, ``--sdm conda`` included):

* :mod:`.config`: the configuration, checked completely once (Snakefile only);
* :mod:`.paths`: where every file goes (path patterns, the table names of
  :data:`cbmm.tables.TABLE_FILES`);
* :mod:`.plan`: what a configuration asks for: simulation and real-data fits, their
  seeds, their packing into batch jobs and the jobs' resources, every target;
* :mod:`.render`: the figures each render job draws, and how;
* :mod:`.store`: the store of finished fits, written and read through
  :meth:`cbmm.FitResult.save` and :meth:`cbmm.FitResult.load` (jobs);
* :mod:`.jobs`: what every job does first: its log, its threads, the user's methods
  and their software (jobs).

The job-side modules (:mod:`.jobs`, :mod:`.store`) import only what every job's
software environment provides (``tests/test_envs.py`` checks it), so this file imports
nothing.
"""
