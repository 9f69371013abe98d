"""Reading Plotly's JSON back in tests: numeric arrays travel as typed-array ``bdata``."""

import base64

import numpy as np


def _array(array) -> np.ndarray:
    data = np.frombuffer(base64.b64decode(array["bdata"]), dtype=np.dtype(array["dtype"]))
    if "shape" in array:
        data = data.reshape([int(n) for n in str(array["shape"]).split(",")])
    return data


def _plain(v):
    return None if isinstance(v, float) and np.isnan(v) else v


def values(array) -> list:
    """A trace's ``x``/``y`` as a list, NaN (a gap) as None."""
    if isinstance(array, dict) and "bdata" in array:
        return [_plain(v) for v in _array(array).tolist()]
    return list(array)


def present(array) -> list:
    """The values that are there (no gaps)."""
    return [v for v in values(array) if v is not None]


def matrix(array) -> list[list]:
    """A heatmap's ``z``/``customdata`` as rows of values, NaN as None."""
    if isinstance(array, dict) and "bdata" in array:
        return [[_plain(v) for v in row] for row in _array(array).tolist()]
    return [list(row) for row in array]
