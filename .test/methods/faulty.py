"""Methods that fail the hard way, for the workflow's failure tests (config key
``method_modules``): ``crash`` kills its process with SIGSEGV, as a crash inside
a compiled library would; ``hang`` never returns."""

import os
import signal
import time

import cbmm


def crash(responses, theta0, a0, b0, **settings):
    os.kill(os.getpid(), signal.SIGSEGV)


def hang(responses, theta0, a0, b0, **settings):
    time.sleep(3600)


cbmm.register_method("crash", crash, label="Crash", color="#000000", order=60,
                     seconds_per_million_cells=0.5, description="segfaults (tests)")
cbmm.register_method("hang", hang, label="Hang", color="#777777", order=61,
                     seconds_per_million_cells=0.5, description="never returns (tests)")
