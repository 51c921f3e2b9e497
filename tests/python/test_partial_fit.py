"""StandardScaler.partial_fit and MinMaxScaler.partial_fit against scikit-learn's over
several batches (weighted and not, both dtypes), and their contract: the first call
fits, fit starts again, a batch of another width is refused and the model kept."""
import numbers
import os

import numpy as np
import pytest
import sklearn.preprocessing as skp

import gsb.preprocessing as gp
from conftest import DTYPE_IDS, DTYPES, assert_close, assert_same_run, rng

BATCHES = (0, 7, 40, 41, 120)  # batch boundaries: uneven, one of a single row


def _batches(X, w=None):
    for a, b in zip(BATCHES[:-1], BATCHES[1:]):
        yield X[a:b], (None if w is None else w[a:b])


def _data(dtype, seed):
    r = rng(seed)
    X = (r.normal(size=(BATCHES[-1], 4)) * [1, 10, 1e-3, 5] + [0, 100, 3, -7]).astype(dtype)
    X[:, 3] = 2.5  # a constant feature: scale_ 1
    w = r.uniform(0.1, 2.0, size=BATCHES[-1])
    return X, w


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("params", [{}, {"with_mean": False}, {"with_std": False},
                                    {"with_mean": False, "with_std": False}],
                         ids=["default", "no_mean", "no_std", "neither"])
def test_standard_scaler(dtype, weighted, params):
    X, w = _data(dtype, 3)
    g, s = gp.StandardScaler(**params), skp.StandardScaler(**params)
    for Xb, wb in _batches(X, w if weighted else None):
        g.partial_fit(Xb, sample_weight=wb)
        s.partial_fit(Xb, sample_weight=wb)
        for name in ("mean_", "var_", "scale_"):
            gv, sv = getattr(g, name), getattr(s, name)
            if sv is None:
                assert gv is None, name
            else:
                assert gv.dtype == sv.dtype, name
                # a constant feature's variance is rounding noise (~1e-31) on both sides
                assert_close(gv, sv, rtol=1e-10, scaled_atol=1e-14, what=name)
        # a count stays a count (gsb hands counts out as Python ints), a weight sum a float
        assert isinstance(g.n_samples_seen_, numbers.Integral) == \
            isinstance(s.n_samples_seen_, numbers.Integral)
        assert_close(g.n_samples_seen_, s.n_samples_seen_, rtol=1e-12, what="n_samples_seen_")
    Q = X[::5]
    # float32: rounding of x - mean_ (the column of std 1e-3 around 3 keeps only ~4
    # digits) and of the results (~3000 without centring)
    f32 = dtype == np.float32
    assert_close(g.transform(Q), s.transform(Q), rtol=1e-6 if f32 else 1e-9,
                 atol=3e-4 if f32 else 1e-12, what="transform")


def test_standard_scaler_mixed_weighting():
    """A weighted batch then an unweighted one: scikit-learn's counts, dtypes included."""
    X, w = _data(np.float64, 4)
    g, s = gp.StandardScaler(), skp.StandardScaler()
    for est in (g, s):
        est.partial_fit(X[:30], sample_weight=w[:30])
        est.partial_fit(X[30:60])
        est.partial_fit(X[60:], sample_weight=w[60:])
    assert_close(g.mean_, s.mean_, rtol=1e-12, what="mean_")
    assert_close(g.var_, s.var_, rtol=1e-10, scaled_atol=1e-14, what="var_")
    assert g.n_samples_seen_ == s.n_samples_seen_


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("params", [{}, {"feature_range": (-2, 3)}, {"clip": True}],
                         ids=["default", "range", "clip"])
def test_minmax_scaler(dtype, params):
    X, _ = _data(dtype, 5)
    g, s = gp.MinMaxScaler(**params), skp.MinMaxScaler(**params)
    for Xb, _ in _batches(X):
        g.partial_fit(Xb)
        s.partial_fit(Xb)
        for name in ("data_min_", "data_max_", "data_range_", "scale_", "min_"):
            assert getattr(g, name).dtype == getattr(s, name).dtype, name
            assert_close(getattr(g, name), getattr(s, name), rtol=1e-6 if dtype == np.float32
                         else 1e-14, what=name)
        assert g.n_samples_seen_ == s.n_samples_seen_
        assert type(g.n_samples_seen_) is type(s.n_samples_seen_)
    assert_close(g.transform(X * 1.1), s.transform(X * 1.1), rtol=1e-5, atol=1e-6,
                 what="transform")


@pytest.mark.parametrize("cls", ["StandardScaler", "MinMaxScaler"])
def test_contract(cls):
    X, _ = _data(np.float64, 6)
    g = getattr(gp, cls)()
    assert g.partial_fit(X[:10]) is g
    assert g.n_features_in_ == 4
    with pytest.raises(ValueError, match=f"X has 3 features, but {cls} is expecting 4 "
                                         f"features as input."):
        g.partial_fit(X[:5, :3])
    assert g.n_samples_seen_ == 10  # the model was kept
    g.partial_fit(X[10:20])
    assert g.n_samples_seen_ == 20
    g.fit(X[:3])  # fit starts again
    assert g.n_samples_seen_ == 3


def test_feature_names_kept():
    pd = pytest.importorskip("pandas")
    X, _ = _data(np.float64, 7)
    df = pd.DataFrame(X, columns=list("abcd"))
    g = gp.StandardScaler().partial_fit(df[:10])
    g.partial_fit(df[10:])
    assert list(g.feature_names_in_) == list("abcd")


def test_remote_session(tmp_path):
    """partial_fit is an engine method: a gsbd session updates its model the same way."""
    import gc

    import gsb
    import gsb.server
    X, w = _data(np.float64, 8)
    srv = gsb.server.start(listen=["tcp://127.0.0.1:0"], data_dir=tmp_path,
                           device=os.environ.get("GSB_DEVICE", "cpu"),
                           log_level="warn")
    try:
        local = gp.StandardScaler()
        for Xb, wb in _batches(X, w):
            local.partial_fit(Xb, sample_weight=wb)
        gsb.connect(srv.url)
        remote = gp.StandardScaler()
        for Xb, wb in _batches(X, w):
            remote.partial_fit(Xb, sample_weight=wb)
        assert_same_run(remote.mean_, local.mean_, "mean_")
        assert_same_run(remote.var_, local.var_, "var_")
        assert remote.n_samples_seen_ == local.n_samples_seen_
    finally:
        gsb.connect(None)
        gc.collect()
        srv.stop()
