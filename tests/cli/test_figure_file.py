"""cli/figure_file.py: a figure replaces an earlier one only once it is whole."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from cli.figure_file import save_figure  # noqa: E402


def test_a_figure_that_fails_to_draw_leaves_the_earlier_one(tmp_path, monkeypatch):
    png = tmp_path / "losses.png"
    fig = plt.figure()
    assert save_figure(fig, png, 20) == ""
    earlier = png.read_bytes()
    assert earlier.startswith(b"\x89PNG")

    def fail_midway(self, path, **kwargs):
        with open(path, "wb") as half:
            half.write(b"\x89PNG half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(type(fig), "savefig", fail_midway)
    assert save_figure(fig, png, 20) == f"error: --png: cannot write {png}: No space left on device"
    assert png.read_bytes() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["losses.png"]  # no partial file
    plt.close(fig)


@pytest.mark.parametrize("name", ["plot.pdf", "plot.svg", "plot.png"])
def test_the_suffix_still_chooses_the_format(tmp_path, name):
    fig = plt.figure()
    assert save_figure(fig, tmp_path / name, 20) == ""
    head = (tmp_path / name).read_bytes()[:5]
    assert head in {b"%PDF-", b"<?xml", b"\x89PNG\r"}
    assert name.endswith({b"%PDF-": "pdf", b"<?xml": "svg", b"\x89PNG\r": "png"}[head])
    plt.close(fig)
