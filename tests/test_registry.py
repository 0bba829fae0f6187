"""The method registry is the one place for a method's label, colour, order and options:
a method added with register_method appears in tables and figures with its own label and
colour, and its options are checked and parsed from its declaration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

import cbmm
from cbmm.registry import _METHODS, Option, get_method, method_order
from cbmm.tables import method_label, ordered_methods, runtime_summary, speedup_table


def _toy_solve(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0, a0, b0, [], 0, "converged", 0.0)


@pytest.fixture
def toy():
    cbmm.register_method("toyirt", _toy_solve, label="Toy IRT", color="#123456", order=2,
                         options={"steps": Option("int", 3, minimum=1, doc="steps per pass"),
                                  "rate": Option("float", None, exclusive_minimum=0,
                                                 nullable=True, doc="step size"),
                                  "mode": Option("str", "fast", choices=("fast", "slow")),
                                  "trace": Option("bool", False)})
    yield "toyirt"
    _METHODS.pop("toyirt", None)


def test_a_registered_method_has_its_place_in_tables(toy):
    assert method_label("toyirt") == "Toy IRT"
    # order 2 sorts it after manopt (2, by name) and before cbmm (3)
    assert method_order(["cbmm", "toyirt", "mirt", "manopt"]) == ["mirt", "manopt", "toyirt",
                                                                   "cbmm"]
    assert ordered_methods(["cbmm", "toyirt"]) == ["toyirt", "cbmm"]
    with pytest.raises(ValueError, match="runtime: column 'method': unknown method.*'nope'"):
        ordered_methods(["cbmm", "nope"], "runtime")
    rows = [{"dataset": "IFEval", "n_models": 10, "n_items": 5, "method": m, "replicate": r,
             "status": "converged", "runtime_s": t * (1 + 0.1 * r)}
            for m, t in (("cbmm", 1.0), ("lbfgsb", 20.0), ("toyirt", 5.0)) for r in range(2)]
    summary = runtime_summary(pd.DataFrame(rows))
    assert list(summary["method"]) == ["lbfgsb", "toyirt", "cbmm"]
    speed = speedup_table(summary).iloc[0]
    assert speed["fastest_baseline"] == "toyirt"
    assert speed["speedup"] == pytest.approx(5.25 / 1.05)


def test_a_registered_method_is_drawn_with_its_label_and_colour(toy, tmp_path):
    from cbmm.figures import plot_runtime
    from cbmm.figures.style import method_color, method_legend_handles

    assert method_color("toyirt") == "#123456"
    assert method_color("cbmm") == get_method("cbmm").color
    handle, = method_legend_handles(["toyirt"])
    assert handle.get_label() == "Toy IRT" and to_hex(handle.get_edgecolor()) == "#123456"
    rows = [{"dataset": d, "n_models": 10, "n_items": j, "method": m, "replicate": r,
             "status": "converged", "runtime_s": t}
            for d, j in (("IFEval", 541), ("BBH", 5761)) for m, t in (("cbmm", 1.0),
                                                                     ("toyirt", 4.0))
            for r in range(2)]
    fig = plot_runtime(pd.DataFrame(rows), [tmp_path / "runtime.png"])
    toy_line = next(line for line in fig.axes[0].get_lines() if line.get_label() == "toyirt")
    assert to_hex(toy_line.get_color()) == "#123456"
    legend = {t.get_text(): to_hex(h.get_color()) for t, h in
              zip(fig.legends[0].get_texts(), fig.legends[0].legend_handles)
              if t.get_text() != "Speedup of cBMM"}
    assert legend == {"Toy IRT": "#123456", "cBMM": get_method("cbmm").color}
    assert (tmp_path / "runtime.png").stat().st_size > 2000


def test_options_are_checked_and_parsed_from_their_declaration(toy):
    spec = get_method("toyirt")
    assert spec.check_options({}) == {"steps": 3, "rate": None, "mode": "fast", "trace": False}
    assert spec.check_options({"steps": np.int64(5), "rate": 1})["steps"] == 5
    assert type(spec.check_options({"rate": 1})["rate"]) is float
    assert spec.options["steps"].parse("steps", "7") == 7
    assert spec.options["rate"].parse("rate", "none") is None
    assert spec.options["rate"].parse("rate", "0.5") == 0.5
    assert spec.options["trace"].parse("trace", "yes") is True
    assert spec.options["mode"].parse("mode", "slow") == "slow"
    for name, text, message in [("steps", "abc", "option 'steps' must be an integer >= 1"),
                                ("steps", "2.5", "got 2.5"), ("steps", "0", ">= 1"),
                                ("steps", "true", "got True"), ("rate", "0", "> 0"),
                                ("rate", "NaN", "finite"), ("rate", "nan", "a number > 0 or null"),
                                ("trace", "maybe", "true or false"),
                                ("mode", "medium", r"one of \['fast', 'slow'\]")]:
        with pytest.raises(ValueError, match=message):
            spec.options[name].parse(name, text)
    with pytest.raises(ValueError, match=r"method 'toyirt' has no option\(s\) 'step'; "
                                         r"its options are: mode, rate, steps, trace"):
        spec.check_options({"step": 1})
    with pytest.raises(ValueError, match="method 'toyirt': option 'steps'"):
        spec.check_options({"steps": "3"})


@pytest.mark.parametrize("kwargs,message", [
    ({"name": "Bad-Name"}, "lower-case identifiers"),
    ({"solve": "not callable"}, "solve must be callable"),
    ({"options": {"x": 3}}, "options must map names to cbmm.registry.Option"),
    ({"seconds_per_million_cells": 0}, "seconds_per_million_cells"),
    ({"preload": ("scipy.optimize",)}, "preload must be callable"),
])
def test_register_method_checks_its_arguments(kwargs, message):
    arguments = dict(name="toy_bad", solve=_toy_solve) | kwargs
    with pytest.raises(ValueError, match=message):
        cbmm.register_method(arguments.pop("name"), arguments.pop("solve"), **arguments)
    assert "toy_bad" not in _METHODS
