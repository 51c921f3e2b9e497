"""Parity of gsb.preprocessing with sklearn.preprocessing (StandardScaler, MinMaxScaler,
LabelEncoder).  Tolerances: docs/PARITY.md, "preprocessing"."""
import numpy as np
import pytest
import sklearn.preprocessing as skp

import gsb.preprocessing as gsp
from conftest import (DTYPE_IDS, DTYPES, REAL_SETS, assert_close, assert_same_array_type,
                      check_attr_names, check_attr_types, fitted_attrs, load, rng, xfail)

# A scaler is an affine map per column, Y = X * mult + add.  Computed in precision eps
# its forward error is about eps * (|X * mult| + |add| + |Y|) per entry, however the
# two libraries order the operations, plus the error of the fitted statistic itself:
# a mean of n values summed in another order differs by up to ~sqrt(n) eps |X|
# (min and max are exact).  That, times a small constant, is the tolerance: tight
# for well-scaled columns, honest for a column whose mean is large against its
# spread.  The fitted statistics are accumulated in float64 by
# scikit-learn for both dtypes (mean_, var_ are float64 even for float32 X).
AFFINE_C = 4
STAT_TOL = {np.float64: dict(rtol=1e-12, scaled_atol=1e-13),
            np.float32: dict(rtol=1e-6, scaled_atol=1e-6)}


def _data(source, dtype):
    """(train, held-out) rows: a shipped data set split in two, or synthetic columns of
    different location and scale (spread 1e-2..1e2, centres up to 100) and one
    constant column."""
    if source in REAL_SETS:
        X, _ = load(source, dtype)
        return X[::2], X[1::2]
    n, d = source
    g = rng(n * 1000 + d)
    X = g.standard_normal((n + n // 2, d)) * np.geomspace(1e-2, 1e2, d) + \
        g.uniform(-100, 100, size=d)
    X[:, 0] = 7.5  # a constant column: scale 1 (StandardScaler) / range 0 (MinMaxScaler)
    X = X.astype(dtype)
    return X[:n], X[n:]


SOURCES = list(REAL_SETS) + [(50, 3), (2000, 20), (20000, 8)]
SOURCE_IDS = list(REAL_SETS) + ["syn50x3", "syn2000x20", "syn20000x8"]


def _affine(s):
    """(mult, add) of a fitted scikit-learn scaler: transform(X) = X * mult + add."""
    if isinstance(s, skp.MinMaxScaler):
        return s.scale_, s.min_
    mult = 1.0 / s.scale_ if s.scale_ is not None else np.ones(s.n_features_in_)
    add = -s.mean_ * mult if s.with_mean else np.zeros_like(mult)
    return mult, add


def _affine_atol(X, Y, mult, add, dtype, stat_term):
    """Per-column bound for Y = X * mult + add; stat_term: the fitted statistic's own
    error in Y's units, in ulps."""
    eps = np.finfo(dtype).eps
    return AFFINE_C * eps * (np.max(np.abs(X), axis=0) * np.abs(mult) + np.abs(add)
                             + np.max(np.abs(Y), axis=0) + stat_term)


def _close_columns(actual, desired, atol_per_column, what):
    assert_same_array_type(actual, desired, what)
    assert_close(actual, desired, rtol=0, atol=np.broadcast_to(atol_per_column, desired.shape),
                 what=what)


def _compare_scaler(g, s, Xtr, Xte, dtype):
    """Fitted attributes (those gsb has; names are checked apart), transform and
    inverse_transform of training and held-out rows."""
    common = [n for n in fitted_attrs(s) if n in fitted_attrs(g)]
    check_attr_types(g, s, common)
    for name in common:
        sv = getattr(s, name)
        if isinstance(sv, np.ndarray):
            assert_close(getattr(g, name), sv, **STAT_TOL[dtype], what=name)
        else:
            assert getattr(g, name) == sv, name
    mult, add = _affine(s)
    # a mean's error in X's units (ulps): up to n ulps of max|X| for a sum in an
    # unspecified order (the GPU reduces in blocks; sqrt(n), the typical error,
    # was exceeded once on digits); min and max are exact
    stat = len(Xtr) * np.max(np.abs(Xtr), axis=0) \
        if isinstance(s, skp.StandardScaler) else 0.0
    for X, what in ((Xtr, "train"), (Xte, "held-out")):
        gt, st = g.transform(X), s.transform(X)
        _close_columns(gt, st, _affine_atol(X, st, mult, add, dtype, stat * np.abs(mult)),
                       f"transform {what}")
        gi, si = g.inverse_transform(st), s.inverse_transform(st)
        _close_columns(gi, si, _affine_atol(st, si, 1 / mult, -add / mult, dtype, stat),
                       f"inverse_transform {what}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", SOURCES, ids=SOURCE_IDS)
@pytest.mark.parametrize("params", [{}, {"with_mean": False}, {"with_std": False}],
                         ids=["default", "no_mean", "no_std"])
def test_standard_scaler(source, dtype, params):
    Xtr, Xte = _data(source, dtype)
    g = gsp.StandardScaler(**params).fit(Xtr)
    s = skp.StandardScaler(**params).fit(Xtr)
    _compare_scaler(g, s, Xtr, Xte, dtype)


@pytest.mark.parametrize("params", [
    {}, {"with_mean": False},
    {"with_std": False},
], ids=["default", "no_mean", "no_std"])
def test_standard_scaler_attribute_names(params):
    X, _ = load("wine")
    check_attr_names(gsp.StandardScaler(**params).fit(X), skp.StandardScaler(**params).fit(X))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_standard_scaler_sample_weight(dtype):
    Xtr, Xte = _data((500, 6), dtype)
    w = rng(7).uniform(0.1, 3.0, size=len(Xtr))
    g = gsp.StandardScaler().fit(Xtr, sample_weight=w)
    s = skp.StandardScaler().fit(Xtr, sample_weight=w)
    _compare_scaler(g, s, Xtr, Xte, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", SOURCES, ids=SOURCE_IDS)
@pytest.mark.parametrize("params", [{}, {"feature_range": (-2.0, 3.0)},
                                    {"feature_range": (-1, 1), "clip": True}],
                         ids=["default", "range", "clip"])
def test_minmax_scaler(source, dtype, params):
    Xtr, Xte = _data(source, dtype)
    Xte = Xte * 1.5  # held-out rows outside the fitted range exercise clip
    g = gsp.MinMaxScaler(**params).fit(Xtr)
    s = skp.MinMaxScaler(**params).fit(Xtr)
    check_attr_names(g, s)
    _compare_scaler(g, s, Xtr, Xte, dtype)


# ---- LabelEncoder: sklearn's API is fit(y), transform(y), inverse_transform(y) ----------

LABELS = [
    (np.array([3.0, 1.0, 2.0, 3.0, 1.0, 10.5, -4.0]), "float64"),
    (rng(1).integers(-5, 50, size=300), "int64"),
    (rng(2).integers(0, 7, size=100).astype(np.int32), "int32"),
    (np.array(["b", "a", "c", "a", "b"]), "str"),
]


@pytest.mark.parametrize("y", [c[0] for c in LABELS], ids=[c[1] for c in LABELS])
def test_label_encoder(y):
    g = gsp.LabelEncoder().fit(y)
    s = skp.LabelEncoder().fit(y)
    check_attr_names(g, s)
    assert_same_array_type(g.classes_, s.classes_, "classes_")
    np.testing.assert_array_equal(g.classes_, s.classes_)
    gt, st = g.transform(y), s.transform(y)
    assert_same_array_type(gt, st, "transform")
    np.testing.assert_array_equal(gt, st)
    codes = rng(3).integers(0, len(s.classes_), size=20)
    gi, si = g.inverse_transform(codes), s.inverse_transform(codes)
    assert_same_array_type(gi, si, "inverse_transform")
    np.testing.assert_array_equal(gi, si)
    np.testing.assert_array_equal(gsp.LabelEncoder().fit_transform(y), st)


@pytest.mark.parametrize("name", ["iris", "wine", "breast_cancer", "digits"])
def test_label_encoder_real_targets(name):
    _, y = load(name)
    g, s = gsp.LabelEncoder(), skp.LabelEncoder()
    np.testing.assert_array_equal(g.fit_transform(y), s.fit_transform(y))
    assert_same_array_type(g.classes_, s.classes_, "classes_")


def test_label_encoder_unseen_label_is_an_error():
    s = skp.LabelEncoder().fit([1, 2, 3])
    with pytest.raises(ValueError):
        s.transform([4])
    g = gsp.LabelEncoder().fit(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError):
        g.transform(np.array([4.0]))
    with pytest.raises(ValueError):
        g.inverse_transform(np.array([3]))
    with pytest.raises(ValueError):
        s.inverse_transform([3])
