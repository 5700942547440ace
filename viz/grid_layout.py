"""Margins and gaps of an attention heatmap grid, in inches, computed in advance.

Matplotlib's constrained layout would find them by measuring every tick label, which
takes longer than drawing the figure; training draws one figure per layer at every
evaluation, so here they follow from the length of the longest label instead.
"""

from dataclasses import dataclass

from viz.char_labels import display_width

CHAR_INCHES = 0.08  # a narrow character at 8 pt (the tick labels); a wide one takes two
INCHES_PER_CHAR = 0.24  # room for one tick label per row and column
TITLE_INCHES = 0.4  # a 12-pt figure title and the space under it
PANEL_INCHES = (1.8, 8.0)  # smallest and largest panel side, whatever the prompt length


def panel_inches(T: int) -> float:
    """Side of one heatmap panel, in inches, for a T-character prompt."""
    low, high = PANEL_INCHES
    return min(high, max(low, INCHES_PER_CHAR * T + 0.4))


def label_inches(labels: list[str]) -> float:
    """Room, in inches, that the longest tick label takes along its reading direction."""
    return CHAR_INCHES * max(display_width(s) for s in labels) + 0.05


@dataclass(frozen=True)
class GridLayout:
    """Where the panels of an attention grid go, in inches, fixed in advance.

    Attributes:
        side: panel side; n_layer, n_head: rows and columns of panels;
        label: inches the longest tick label needs; titled: room for a figure title.
    """

    side: float
    n_layer: int
    n_head: int
    label: float
    titled: bool

    @property
    def x_label_rotation(self) -> int:
        """Labels longer than a wide character (code points) stand upright so they do
        not overlap their neighbours."""
        return 90 if self.label > 2 * CHAR_INCHES + 0.05 else 0

    @property
    def x_label_height(self) -> float:
        """Inches the x tick labels take below a panel."""
        return self.label if self.x_label_rotation else CHAR_INCHES * 2

    @property
    def margins(self) -> tuple[float, float, float, float]:
        """(left, right, bottom, top) in inches: tick labels and axis titles, the colour
        bar, the panel titles and the figure title."""
        left = self.label + 0.35
        right = 1.0
        bottom = self.x_label_height + 0.4
        top = 0.35 + (TITLE_INCHES if self.titled else 0.0)
        return left, right, bottom, top

    def title_y(self) -> float:
        """Figure-fraction height of the top of the figure title: a fixed distance below
        the top edge, whatever the figure height (matplotlib's default is a fraction)."""
        return 1 - 0.08 / self.height

    @property
    def gaps(self) -> tuple[float, float]:
        """(between columns, between rows) in inches: tick labels, then a panel title."""
        return self.label + 0.2, self.x_label_height + 0.45

    @property
    def width(self) -> float:
        """Figure width in inches."""
        left, right, _, _ = self.margins
        return left + self.n_head * self.side + (self.n_head - 1) * self.gaps[0] + right

    @property
    def height(self) -> float:
        """Figure height in inches."""
        _, _, bottom, top = self.margins
        return bottom + self.n_layer * self.side + (self.n_layer - 1) * self.gaps[1] + top

    def gridspec(self) -> dict:
        """Keyword arguments for ``Figure.subplots(gridspec_kw=...)`` (figure fractions)."""
        left, right, bottom, top = self.margins
        hgap, vgap = self.gaps
        return {
            "left": left / self.width,
            "right": 1 - right / self.width,
            "bottom": bottom / self.height,
            "top": 1 - top / self.height,
            "wspace": hgap / self.side,
            "hspace": vgap / self.side,
        }

    def colorbar_rect(self) -> list[float]:
        """[left, bottom, width, height] of the colour bar, in figure fractions."""
        _, right, bottom, top = self.margins
        x = (self.width - right + 0.2) / self.width
        return [x, bottom / self.height, 0.15 / self.width, 1 - (bottom + top) / self.height]
