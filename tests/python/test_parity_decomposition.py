"""Parity of gsb.decomposition with sklearn.decomposition (PCA, TruncatedSVD).
Tolerances: docs/PARITY.md, "decomposition"."""
import numpy as np
import pytest
import sklearn.decomposition as skd

import gsb.decomposition as gsd
from conftest import (DTYPE_IDS, DTYPES, REAL_SETS, assert_close, assert_same_array_type,
                      check_attr_names, check_attr_types, fitted_attrs, load, low_rank, rng,
                      xfail)

# A singular vector is determined to about eps * sqrt(d) * lambda_1 / gap_k, where
# gap_k is the distance of its eigenvalue (of the covariance, or of X^T X for
# TruncatedSVD) to the nearest other one: a backward-stable SVD or eigh is exact for
# data perturbed by ~eps sqrt(d) ||X||, and Davis-Kahan turns that into the vector's
# error, whichever solver either library uses.  Each component is compared within C_VEC times that
# bound; components whose bound exceeds 0.1 (repeated or null eigenvalues, e.g. the
# digits' constant pixels) are not determined by the data and are only checked to
# be orthonormal.  Eigen/singular values are compared relative to the largest one.
C_VEC = 16
C_VAL = 64  # ulps of the largest eigenvalue
UNDETERMINED = 0.1


def _eps(dtype):
    return float(np.finfo(dtype).eps)


def _vector_bounds(eigvals_all, k, dtype):
    """Per-component tolerance for the first k of all eigenvalues (descending)."""
    lam = np.asarray(eigvals_all, dtype=np.float64)
    gaps = np.full(k, np.inf)
    for i in range(k):
        if i > 0:
            gaps[i] = min(gaps[i], lam[i - 1] - lam[i])
        if i + 1 < len(lam):
            gaps[i] = min(gaps[i], lam[i] - lam[i + 1])
    with np.errstate(divide="ignore"):
        return C_VEC * _eps(dtype) * np.sqrt(len(lam)) * lam[0] / np.maximum(gaps, 0.0)


def _compare_components(gc, sc, bounds, what="components_"):
    assert_same_array_type(gc, sc, what)
    det = bounds < UNDETERMINED
    assert det.any(), "no determined component to compare"
    assert_close(gc[det], sc[det], rtol=0, atol=bounds[det][:, None], what=what)
    # every row, determined or not: orthonormal (to the data's precision)
    gram = gc.astype(np.float64) @ gc.astype(np.float64).T
    assert_close(gram, np.eye(len(gc)), rtol=0, atol=100 * _eps(gc.dtype),
                 what=f"{what} orthonormality")
    return det


def _compare_projection(gt, st, bounds, det, Xc_norm, dtype, what):
    """Projections onto the components: column k within bound_k * max_i ||x_i - mean||."""
    assert_same_array_type(gt, st, what)
    atol = bounds[det] * Xc_norm + C_VAL * _eps(dtype) * np.max(np.abs(st))
    assert_close(gt[:, det], st[:, det], rtol=0, atol=atol, what=what)


def _all_eigenvalues(X, center=True):
    """Every eigenvalue of the (uncentred for TruncatedSVD) covariance, float64."""
    X = X.astype(np.float64)
    if center:
        X = X - X.mean(axis=0)
    s = np.linalg.svd(X, compute_uv=False)
    lam = s ** 2 / max(len(X) - 1, 1)
    return np.concatenate([lam, np.zeros(max(X.shape[1] - len(lam), 0))])


# ---- PCA ----------------------------------------------------------------------------------

def _pca_data(source, dtype):
    if source in REAL_SETS:
        return load(source, dtype)[0]
    n, d = source
    g = rng(n + 7 * d)
    # decaying spectrum with distinct eigenvalues
    X = g.standard_normal((n, d)) * np.geomspace(10, 0.1, d) @ \
        np.linalg.qr(g.standard_normal((d, d)))[0] + g.uniform(-5, 5, size=d)
    return X.astype(dtype)


PCA_SOURCES = list(REAL_SETS) + [(100, 8), (2000, 40), (6000, 60)]
PCA_IDS = list(REAL_SETS) + ["syn100x8", "syn2000x40", "syn6000x60"]


def compare_pca(g, s, X, dtype):
    assert g.n_components_ == s.n_components_
    assert g.n_samples_ == s.n_samples_
    k = s.n_components_
    lam = _all_eigenvalues(X)
    bounds = _vector_bounds(lam, k, dtype)
    det = _compare_components(g.components_, s.components_, bounds)
    scale = C_VAL * _eps(dtype)
    # The covariance route forms X^T X - n mean mean^T in X's dtype (scikit-learn's own
    # way): its rounding is relative to the uncentred second moments, not to lam[0].
    # On wine in float32 (proline: mean^2 ~ 5.6 var) scikit-learn's explained_variance_[0]
    # is 9.4e-6 off the exact value itself, above 64 ulps.
    ev_scale = scale
    if getattr(s, "_fit_svd_solver", None) == "covariance_eigh":
        second = np.max(np.mean(X.astype(np.float64) ** 2, axis=0)) * len(X) / (len(X) - 1)
        ev_scale = scale * max(1.0, second / lam[0])
    for name in ("explained_variance_", "singular_values_"):
        assert_same_array_type(getattr(g, name), getattr(s, name), name)
        assert_close(getattr(g, name), getattr(s, name), rtol=0, scaled_atol=ev_scale, what=name)
    # a mean of n values summed in another order: ~sqrt(n) ulps of max |X|
    assert_same_array_type(g.mean_, s.mean_, "mean_")
    assert_close(g.mean_, s.mean_, rtol=0, atol=scale * np.sqrt(len(X)) * np.max(np.abs(X)),
                 what="mean_")
    assert_close(g.explained_variance_ratio_, s.explained_variance_ratio_, rtol=0,
                 atol=scale, what="explained_variance_ratio_")
    assert_close(g.noise_variance_, s.noise_variance_, rtol=0, atol=scale * lam[0],
                 what="noise_variance_")
    Xc_norm = np.max(np.linalg.norm(X.astype(np.float64) - X.mean(axis=0), axis=1))
    Xte = X[::3]
    gt, st = g.transform(Xte), s.transform(Xte)
    tb = bounds
    if s.whiten:
        # whitened column k is divided by sqrt(lambda_k)
        tb = bounds / np.sqrt(s.explained_variance_ / lam[0])
        Xc_norm = Xc_norm / np.sqrt(lam[0])
    _compare_projection(gt, st, tb, det, Xc_norm, dtype, "transform")
    if det.all():
        # X = T (sqrt(lambda) if whitened) @ components_ + mean_: each column of T
        # carries its component's error
        gi, si = g.inverse_transform(st), s.inverse_transform(st)
        assert_same_array_type(gi, si, "inverse_transform")
        t_size = np.max(np.abs(st), axis=0) * (np.sqrt(s.explained_variance_) if s.whiten
                                               else 1.0)
        assert_close(gi, si, rtol=0, atol=np.sum(t_size * bounds) + scale * np.max(np.abs(si)),
                     what="inverse_transform")
    return det


PCA_PARAMS = [
    {"svd_solver": "full"},
    {"svd_solver": "full", "n_components": 3, "whiten": True},
    {"svd_solver": "covariance_eigh", "n_components": 0.9},
    {"n_components": 2},  # "auto"
]
PCA_PARAM_IDS = ["full", "full3_whiten", "eigh_0.9", "auto2"]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", PCA_SOURCES, ids=PCA_IDS)
@pytest.mark.parametrize("params", PCA_PARAMS, ids=PCA_PARAM_IDS)
def test_pca(params, source, dtype):
    X = _pca_data(source, dtype)
    g = gsd.PCA(**params).fit(X)
    s = skd.PCA(**params).fit(X)
    compare_pca(g, s, X, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", ["iris", "wine", "diabetes", (2000, 40)],
                         ids=["iris", "wine", "diabetes", "syn2000x40"])
def test_pca_mle(source, dtype):
    """n_components='mle' (Minka) picks the same number of components.  (Data of full
    rank only: on digits the choice hinges on eigenvalues that are rounding noise.)"""
    X = _pca_data(source, dtype)
    g = gsd.PCA(n_components="mle", svd_solver="full").fit(X)
    s = skd.PCA(n_components="mle", svd_solver="full").fit(X)
    compare_pca(g, s, X, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", ["iris", "breast_cancer", (2000, 40)],
                         ids=["iris", "breast_cancer", "syn2000x40"])
def test_pca_fit_transform(source, dtype):
    X = _pca_data(source, dtype)
    s = skd.PCA(n_components=3, svd_solver="full")
    st = s.fit_transform(X)
    g = gsd.PCA(n_components=3, svd_solver="full")
    gt = g.fit_transform(X)
    bounds = _vector_bounds(_all_eigenvalues(X), 3, dtype)
    Xc_norm = np.max(np.linalg.norm(X.astype(np.float64) - X.mean(axis=0), axis=1))
    _compare_projection(gt, st, bounds, bounds < UNDETERMINED, Xc_norm, dtype,
                        "fit_transform")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", ["iris", "wine", "diabetes", (2000, 40)],
                         ids=["iris", "wine", "diabetes", "syn2000x40"])
def test_pca_score(source, dtype):
    """Probabilistic PCA log-likelihood (n_components < n_features: the noise
    variance is positive and the model covariance invertible)."""
    X = _pca_data(source, dtype)
    g = gsd.PCA(n_components=2, svd_solver="full").fit(X)
    s = skd.PCA(n_components=2, svd_solver="full").fit(X)
    Xte = X[1::2]
    gs, ss = g.score_samples(Xte), s.score_samples(Xte)
    assert_same_array_type(gs, ss, "score_samples")
    # the log-likelihood is a sum of squares / noise variance and logs: relative
    # error a few hundred ulps in float64; float32 residuals cancel to ~1e-4
    tol = 1e-9 if dtype == np.float64 else 2e-3
    assert_close(gs, ss, rtol=tol, scaled_atol=tol, what="score_samples")
    assert_close(g.score(Xte), s.score(Xte), rtol=tol, what="score")


def test_pca_covariance_and_precision():
    X = _pca_data("wine", np.float64)
    g = gsd.PCA(n_components=4).fit(X)
    s = skd.PCA(n_components=4).fit(X)
    assert_close(g.get_covariance(), s.get_covariance(), rtol=1e-10, scaled_atol=1e-12,
                 what="get_covariance")
    assert_close(g.get_precision(), s.get_precision(), rtol=1e-8, scaled_atol=1e-10,
                 what="get_precision")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("n,d,rank", [(500, 30, 3), (3000, 100, 8)],
                         ids=["500x30r3", "3000x100r8"])
def test_pca_randomized_vs_exact(n, d, rank, dtype):
    """On data with a spectral gap of ~250 between component `rank` and the noise, the
    randomized solver (4+ power iterations) finds the exact leading subspace: gsb's
    randomized PCA equals scikit-learn's full PCA to the same tolerances, sign
    convention included, and scikit-learn's randomized PCA to the same."""
    X = low_rank(n, d, rank, dtype, seed=n + d)
    g = gsd.PCA(n_components=rank, svd_solver="randomized", random_state=0).fit(X)
    for s in (skd.PCA(n_components=rank, svd_solver="full").fit(X),
              skd.PCA(n_components=rank, svd_solver="randomized", random_state=0).fit(X)):
        compare_pca(g, s, X, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_pca_attributes(dtype):
    X = _pca_data("wine", dtype)
    g = gsd.PCA(n_components=3).fit(X)
    s = skd.PCA(n_components=3).fit(X)
    check_attr_names(g, s)
    arrays = [n for n, v in fitted_attrs(s).items() if not np.isscalar(v)]
    check_attr_types(g, s, arrays)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=DTYPE_IDS)
def test_pca_scalar_attributes(dtype):
    X = _pca_data("wine", dtype)
    g = gsd.PCA(n_components=3).fit(X)
    s = skd.PCA(n_components=3).fit(X)
    check_attr_types(g, s, [n for n, v in fitted_attrs(s).items() if np.isscalar(v)])


# ---- TruncatedSVD ---------------------------------------------------------------------------

def _tsvd_data(source, dtype):
    if source in REAL_SETS:
        return load(source, dtype)[0]
    n, d = source
    g = rng(n + 11 * d)
    X = np.abs(g.standard_normal((n, d))) * np.geomspace(5, 0.2, d)  # non-negative, uncentred
    return X.astype(dtype)


def compare_tsvd(g, s, X, dtype, k):
    lam = _all_eigenvalues(X, center=False)  # of X^T X / (n - 1): same gaps, scaled
    bounds = _vector_bounds(lam, k, dtype)
    det = _compare_components(g.components_, s.components_, bounds)
    scale = C_VAL * _eps(dtype)
    assert_same_array_type(g.singular_values_, s.singular_values_, "singular_values_")
    assert_close(g.singular_values_, s.singular_values_, rtol=0, scaled_atol=scale,
                 what="singular_values_")
    # the variance of the projections: a component off by bound_k moves it by about
    # 2 bound_k lambda_1; the ratio is that over the total variance
    ev = s.explained_variance_
    atol_ev = (4 * bounds + scale) * np.max(ev)
    total = np.sum(ev) / np.sum(s.explained_variance_ratio_)
    for name, atol in (("explained_variance_", atol_ev),
                       ("explained_variance_ratio_", atol_ev / total)):
        assert_same_array_type(getattr(g, name), getattr(s, name), name)
        assert_close(getattr(g, name), getattr(s, name), rtol=0, atol=atol, what=name)
    Xnorm = np.max(np.linalg.norm(X.astype(np.float64), axis=1))
    Xte = X[1::3]
    _compare_projection(g.transform(Xte), s.transform(Xte), bounds, det, Xnorm, dtype,
                        "transform")
    if det.all():
        st = s.transform(Xte)
        gi, si = g.inverse_transform(st), s.inverse_transform(st)
        assert_same_array_type(gi, si, "inverse_transform")
        assert_close(gi, si, rtol=0, atol=np.sum(np.max(np.abs(st), axis=0) * bounds)
                     + scale * np.max(np.abs(si)), what="inverse_transform")


TSVD_SOURCES = list(REAL_SETS) + [(200, 10), (3000, 50)]
TSVD_IDS = list(REAL_SETS) + ["syn200x10", "syn3000x50"]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("source", TSVD_SOURCES, ids=TSVD_IDS)
@pytest.mark.parametrize("k", [2, 3])
def test_truncated_svd_arpack(k, source, dtype):
    X = _tsvd_data(source, dtype)
    g = gsd.TruncatedSVD(n_components=k, algorithm="arpack", random_state=0).fit(X)
    s = skd.TruncatedSVD(n_components=k, algorithm="arpack", random_state=0).fit(X)
    compare_tsvd(g, s, X, dtype, k)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("n,d,rank", [(500, 30, 3), (3000, 100, 8)],
                         ids=["500x30r3", "3000x100r8"])
def test_truncated_svd_randomized_vs_arpack(n, d, rank, dtype):
    """Randomized (n_iter=5) on data with a spectral gap: the exact leading subspace."""
    X = low_rank(n, d, rank, dtype, seed=n + 3 * d)
    g = gsd.TruncatedSVD(n_components=rank, random_state=0).fit(X)
    s = skd.TruncatedSVD(n_components=rank, algorithm="arpack", random_state=0).fit(X)
    compare_tsvd(g, s, X, dtype, rank)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_truncated_svd_attributes(dtype):
    X = _tsvd_data("wine", dtype)
    g = gsd.TruncatedSVD(n_components=3, algorithm="arpack").fit(X)
    s = skd.TruncatedSVD(n_components=3, algorithm="arpack").fit(X)
    check_attr_names(g, s)
    check_attr_types(g, s, fitted_attrs(s))
