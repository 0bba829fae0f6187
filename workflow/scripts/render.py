"""Draw one figure of cbmm.figures.FIGURES from its tables, with its caption
(rules render_*).

``params.figure`` names the figure, ``params.args`` are its table arguments
(paths, or a mapping dataset -> path), ``params.kwargs`` any options and
``params.caption_args`` the caption function's arguments (what it is told about
the run, e.g. the number of replicates).  The caption goes to ``output.caption``,
which the Snakemake report shows beside the PNG (workflow/report/figure.rst).
Figures that show methods get ``params.method_modules``: the user's methods'
labels and colours come from their registry entries.
"""

from cbmm.figures import FIGURES
from helpers import atomic_path, import_method_modules, start_log

log = start_log(snakemake.log[0], job="render")
p, out = snakemake.params, snakemake.output
import_method_modules(getattr(p, "method_modules", []))
figure = FIGURES[p.figure]
figure.plot(*p.args, out_paths=[out.pdf, out.png], **getattr(p, "kwargs", {}))
with atomic_path(out.caption) as tmp:
    tmp.write_text(figure.caption(**getattr(p, "caption_args", {})) + "\n")
log.info("wrote %s", list(out))
