"""Colour scales for utilization, safe for colour-blind readers (viridis)."""

# Viridis, sampled at 0, 0.25, 0.5, 0.75 and 1 (perceptually uniform, colour-blind safe).
VIRIDIS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
# The same scale as Plotly names it, so charts and tiles agree.
PLOTLY_SCALE = "Viridis"


def viridis(fraction: float) -> str:
    """Hex colour for a value in [0, 1]."""
    f = min(max(fraction, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(f), len(VIRIDIS) - 2)
    t = f - i
    r, g, b = (round(a + (b - a) * t) for a, b in zip(VIRIDIS[i], VIRIDIS[i + 1], strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def text_on(fraction: float) -> str:
    """Black or white text, whichever reads on ``viridis(fraction)``."""
    return "#111" if fraction >= 0.55 else "#fff"
