"""harness/outputs/figures.py: tick labels as plain-text powers of ten, and the verdict matrix drawn as a PNG."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from harness.outputs.figures import plot_matrix, power_text
from suites.unit.outputs.test_render import _cells


@pytest.mark.parametrize("x, text", [(1e-6, "10⁻⁶"), (0.002, "2×10⁻³"), (1000.0, "10³"), (-0.5, "−5×10⁻¹"),
                                     (0.0, "0"), (float("inf"), "inf"), (9.9999e-3, "10⁻²")])
def test_power_text_is_a_plain_power_of_ten(x: float, text: str) -> None:
    assert power_text(x) == text


def test_the_matrix_figure_is_a_png() -> None:
    png = plot_matrix(_cells([{"subject": "a.impl"}, {"subject": "b.impl", "verdict": "broken", "worst_ulp": 4}]))
    img = Image.open(io.BytesIO(png))
    assert img.format == "PNG" and img.size[0] > 100 and img.size[1] > 50
