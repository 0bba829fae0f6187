"""The figures each render job draws: for every figure its file stem, its report
category and subcategory, and what ``workflow/scripts/render.py`` is told to draw it
(``spec``: the figure's name in :func:`cbmm.figures.get_figure`, its table arguments,
options and caption arguments).  A figure's caption comes from its own caption
function; the render job writes it beside the figure."""

from __future__ import annotations

from typing import NamedTuple

from cbmm.tables import suite_label

from . import paths
from .plan import Plan


class Figure(NamedTuple):
    name: str  # file stem under results/figures/
    category: str
    subcategory: str | None
    spec: dict


def sensitivity_figures(plan: Plan) -> list[Figure]:
    """One figure per simulation study, drawn by what the study varies (its design), so
    that every study of the configuration has its figure."""
    definitions = plan.config["figures"]["metric_definitions"]
    replicates = plan.config["simulation"]["replicates"]
    return [Figure(f"sensitivity_{study}", "Simulation studies", study, {
        "figure": f"sensitivity_{study}",
        "args": [paths.SIM_TABLE.format(study=study)],
        "kwargs": {"definitions": definitions, "design": plan.study_design(study)},
        "caption_args": {"config_summary": {"n_replicates": replicates},
                         "definitions": definitions, "design": plan.study_design(study)},
    }) for study in plan.studies]


def runtime_figures(plan: Plan) -> list[Figure]:
    runtime = plan.config["real"]["runtime"]
    return [Figure("runtime", "Scalability", None, {
        "figure": "runtime", "args": [paths.RUNTIME_TABLE],
        "caption_args": {"config_summary": {"n_replicates": runtime["replicates"],
                                            "datasets": runtime["datasets"]}},
    })]


def math500_figures() -> list[Figure]:
    return [Figure("math500_ability", "Interpretability", None,
                   {"figure": "math500_ability", "args": [paths.MATH500_ABILITIES]}),
            Figure("item_difficulty", "Interpretability", None,
                   {"figure": "item_difficulty", "args": [paths.MATH500_ITEMS_TABLE]})]


def _rankflow(name, category, subcategory, top: dict, summary=paths.DISCRIMINATION_TABLE,
              **options) -> Figure:
    rankings = {dataset: paths.RANKINGS.format(dataset=dataset) for dataset in top}
    return Figure(name, category, subcategory, {
        "figure": "rankflow", "args": [rankings, summary],
        "kwargs": {"top": top, **options},
        "caption_args": {"config_summary": {"top": top, **options}},
    })


def interpretability_figures(plan: Plan) -> list[Figure]:
    """The discrimination summary and the paper's rank-flow panels (one job)."""
    figures = [Figure("discrimination", "Interpretability", None,
                      {"figure": "discrimination", "args": [paths.DISCRIMINATION_TABLE]})]
    if plan.rankflow_panels():
        figures.append(_rankflow("rankflow", "Interpretability", None, plan.rankflow_panels()))
    return figures


def dataset_rankflow_figures(plan: Plan) -> list[Figure]:
    """Each interpretability dataset's own rank flow, its models named (each a job of its
    own, reading the dataset's own metrics, so that one dataset's figure cannot take
    another's down, nor a change of one dataset draw the others' again)."""
    interpretability = plan.config["real"]["interpretability"]
    return [_rankflow(f"rankflow_{dataset}", "Rankings", dataset,
                      {dataset: interpretability["rankflow_top"]},
                      summary=paths.REAL_METRICS.format(dataset=dataset), names=True)
            for dataset in interpretability["datasets"]]


def uncertainty_figures(plan: Plan) -> list[Figure]:
    """Each dataset's abilities with their intervals (beyond the paper)."""
    settings = plan.config["real"]["uncertainty"]
    summary = {"top": settings["top"], "n_boot": settings["n_boot"], "level": settings["level"]}
    return [Figure(f"abilities_{dataset}", "Uncertainty", dataset, {
        "figure": "abilities", "args": [paths.ABILITIES_TABLE.format(dataset=dataset)],
        "kwargs": {"top": settings["top"], "dataset": dataset},
        "caption_args": {"config_summary": summary},
    }) for dataset in plan.uncertainty_datasets()]


def efficiency_figures(plan: Plan, dataset: str) -> list[Figure]:
    """A dataset of the efficient-evaluation study's figures (a job of its own, so that one
    dataset's figures cannot take another's down): its selection and adaptive-test
    figure, and its item information map."""
    study = plan.config["real"]["efficiency"]
    settings = {key: study[key] for key in ("splits", "held_models", "test_share", "draws",
                                            "tinybenchmarks")}
    return [
        Figure(f"efficiency_{dataset}", "Efficient evaluation", dataset, {
            "figure": "efficiency",
            "args": [paths.EFFICIENCY_TABLE.format(dataset=dataset),
                     paths.ADAPTIVE_TABLE.format(dataset=dataset)],
            "kwargs": {"title": suite_label(dataset)},
            "caption_args": {"config_summary": {
                **settings, "content": plan.content_balance(dataset)}}}),
        Figure(f"item_audit_{dataset}", "Efficient evaluation", dataset, {
            "figure": "item_audit", "args": [paths.ITEM_AUDIT_TABLE.format(dataset=dataset)],
            "kwargs": {"title": suite_label(dataset)}})]
