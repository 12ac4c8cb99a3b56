"""Every notebook runs top to bottom on the embedded default, in this venv's Python; stored without outputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "throughput-tests"
CHECK_PYTHON = "import sys; print(sys.executable)"


@pytest.fixture(scope="session")
def kernel_manager_factory(tmp_path_factory):
    """Kernels that run this venv's python, whatever kernelspecs the user has installed."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernels = tmp_path_factory.mktemp("kernels")
    (kernels / KERNEL).mkdir()
    (kernels / KERNEL / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "throughput tests", "language": "python"}))

    def make() -> KernelManager:
        return KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))

    return make


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    """Shared by the notebooks of one run: the comparison report reads what the walk-through wrote."""
    return tmp_path_factory.mktemp("notebook-results")


def run_notebook(path: Path, parameters: dict, make_kernel) -> nbformat.NotebookNode:
    """Execute a notebook papermill-style: overrides go in a cell right after the ``parameters`` cell.

    Raises nbclient's CellExecutionError (failing the test) if any cell fails.
    """
    nb = nbformat.read(path, as_version=4)
    tagged = [i for i, cell in enumerate(nb.cells) if "parameters" in cell.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name} needs exactly one cell tagged 'parameters'"
    injected = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    nb.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell(injected, metadata={"tags": ["injected-parameters"]}))
    nb.cells.append(nbformat.v4.new_code_cell(CHECK_PYTHON))
    client = nbclient.NotebookClient(nb, km=make_kernel(), timeout=240, kernel_name=KERNEL,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    # the kernel was this venv's python, not some other installed kernel
    assert nb.cells[-1].outputs[0]["text"].strip() == sys.executable
    return nb


def outputs_text(nb) -> str:
    return "\n".join(out.get("text", "") + json.dumps(out.get("data", {}))
                     for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs)


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS] == [
        "01_walkthrough.ipynb", "02_comparison_report.ipynb", "03_formats_and_providers.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_stored_without_outputs_and_read_as_essays(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert all(not cell.outputs and cell.execution_count is None for cell in code), f"{path.name} has outputs"
    markdown = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "markdown")
    for heading in ("## Overview", "## Prerequisites", "## Imports", "## Summary", "## References",
                    "## Future work"):
        assert heading in markdown, f"{path.name} lacks '{heading}'"
    assert "https://doi.org/10.5281/zenodo.3829032" in markdown
    params = [cell for cell in code if "parameters" in cell.metadata.get("tags", [])]
    assert len(params) == 1 and "workers = [1, 2]" in params[0].source and "repeats = 2" in params[0].source
    # small cells alternating with prose
    assert max(len(cell.source.splitlines()) for cell in code) <= 25
    assert len([c for c in nb.cells if c.cell_type == "markdown"]) >= len(code) // 2


@pytest.mark.slow
def test_walkthrough_runs(kernel_manager_factory, results_dir):
    nb = run_notebook(ROOT / "notebooks" / "01_walkthrough.ipynb", {"results_dir": str(results_dir)},
                      kernel_manager_factory)
    files = list(results_dir.glob("*.csv"))
    assert len(files) == 1
    from throughput.report import load_results

    rows = load_results(files[0])
    assert len(rows) == 4 and set(rows.status) == {"ok"}
    assert sorted(rows.nworkers) == [1, 1, 2, 2] and set(rows.nbytes) == {4 * 10 * 270 * 360 * 4}
    assert (rows.bytes_received == rows.nbytes).all()
    text = outputs_text(nb)
    assert "one chunk: 1.94 MB in" in text and "4 of 4 runs succeeded" in text
    assert text.count("image/png") >= 4  # the map and the three figures


@pytest.mark.slow
def test_comparison_report_runs(kernel_manager_factory, results_dir, tmp_path):
    html = tmp_path / "comparison.html"
    nb = run_notebook(ROOT / "notebooks" / "02_comparison_report.ipynb",
                      {"ours": str(results_dir), "report_html": str(html)}, kernel_manager_factory)
    page = html.read_text()
    assert "OSN Zarr" in page and "GCS Zarr" in page and "local-s3-zarr" in page
    assert 'src="http' not in page
    text = outputs_text(nb)
    assert "5,724.06" in text or "5724.06" in text


@pytest.mark.slow
def test_formats_and_providers_runs(kernel_manager_factory, tmp_path):
    nb = run_notebook(ROOT / "notebooks" / "03_formats_and_providers.ipynb", {"results_dir": str(tmp_path)},
                      kernel_manager_factory)
    from throughput.embedded import embedded_sources  # noqa: F401  (what the notebook looped over)
    from throughput.report import load_results

    rows = load_results(tmp_path)
    per_source = rows.groupby("source").size()
    assert len(per_source) >= 1 and (per_source == 4).all()
    assert set(rows.status) == {"ok"} and (rows.bytes_received == rows.nbytes).all()
    assert "fastest" in outputs_text(nb)
