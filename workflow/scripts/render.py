"""Draw figures of cbmm.figures (get_figure) from their tables, with their captions
(rules render_*; what each draws: cbmm_workflow.render).

``params.figures`` lists the figures of the job, each a mapping: ``figure``
names it, ``args`` are its table arguments (paths, or a mapping dataset ->
path), ``kwargs`` any options and ``caption_args`` the caption function's
arguments (what it is told about the run, e.g. the number of replicates); the caption
ends with the statuses of the fits behind the figure (FigureSpec.caption_for).  The
outputs are each figure's PDF, PNG and caption, in that order
(common.smk, figure_outputs); the Snakemake report shows the caption beside the
PNG.  Figures that show methods get ``params.method_modules``: the user's
methods' labels and colours come from their registry entries.
"""

from cbmm.figures import get_figure
from cbmm.io import atomic_path
from cbmm_workflow.jobs import import_method_modules, start_log

log = start_log(snakemake.log[0], job="render")
p, paths = snakemake.params, list(snakemake.output)
import_method_modules(getattr(p, "method_modules", []))
for k, spec in enumerate(p.figures):
    pdf, png, caption = paths[3 * k:3 * k + 3]
    figure = get_figure(spec["figure"])
    figure.plot(*spec["args"], out_paths=[pdf, png], **spec.get("kwargs", {}))
    with atomic_path(caption) as tmp:
        tmp.write_text(figure.caption_for(spec["args"], **spec.get("caption_args", {})) + "\n")
    log.info("wrote %s, %s and %s", pdf, png, caption)
