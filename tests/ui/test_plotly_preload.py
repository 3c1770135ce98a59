"""The page's <head> script that loads Gradio's Plotly component before the first figure (mlse.ui.plotly_preload).

The browser side (the module fetched with no figure on the page) is in tests/ui/test_app_browser.py.
"""

from __future__ import annotations

from mlse.ui.app import launch_options
from mlse.ui.plotly_preload import ASSET_GLOB, gradio_assets, plotly_chunk, preload_head


def test_the_installed_gradio_has_one_plotly_component():
    chunk = plotly_chunk()
    assert chunk is not None, f"no single {ASSET_GLOB} in {gradio_assets()}: Gradio's build changed; update the glob"
    assert (gradio_assets() / chunk).stat().st_size > 1_000_000  # plotly.js is inside it


def test_no_file_or_several_files_preload_nothing(tmp_path):
    assert plotly_chunk(tmp_path) is None
    (tmp_path / "PlotlyPlot-aaa.js").write_text("")
    assert plotly_chunk(tmp_path) == "PlotlyPlot-aaa.js"
    (tmp_path / "PlotlyPlot-bbb.js").write_text("")
    assert plotly_chunk(tmp_path) is None  # which one the page imports is unknown: import neither
    assert preload_head(None) is None


def test_the_script_imports_the_chunk_relative_to_the_page_once_idle():
    head = preload_head("PlotlyPlot-abc.js")
    assert head.startswith('<script type="module">') and head.endswith("</script>")
    assert "import('./assets/PlotlyPlot-abc.js')" in head  # as index.html loads ./assets/index-*.js
    assert "requestIdleCallback" in head and "'load'" in head
    assert ".catch(" in head  # a failed preload must not surface as an error: Gradio imports it again itself


def test_the_app_launches_with_the_script():
    assert launch_options()["head"] == preload_head(plotly_chunk())
