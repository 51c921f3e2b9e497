"""GPU arrays in and out, and fits larger than the GPU (issue 17).

Without a GPU (CI): CPU DLPack objects are read without a copy, objects with the CUDA
array interface are recognised and copied to the host for a session without a GPU,
gsb.set_config's output_type and gpu_memory_cap work (under a cap of a quarter of X the
streamed fits equal the in-memory ones), and an estimator that cannot stream says so.
With CuPy (or PyTorch) and a GPU (tools/gpu-check): every estimator fed a CuPy array and
a PyTorch CUDA tensor gives the numpy path's result without uploading X (the engine's
host-to-device counter), results and fitted attributes come back as the input's type,
and out-of-core fits on the GPU equal in-memory ones.
"""
import importlib.util

import numpy as np
import pandas as pd
import pytest

import gsb
from gsb import _devarray
from gsb._convert import as_array
from gsb.cluster import KMeans
from gsb.decomposition import PCA, TruncatedSVD
from gsb.linear_model import LinearRegression, LogisticRegression, Ridge
from gsb.neighbors import KNeighborsClassifier, NearestNeighbors
from gsb.preprocessing import MinMaxScaler, StandardScaler


@pytest.fixture(autouse=True)
def _restore_config():
    # the device as the run set it (GSB_DEVICE=cuda on the GPU suite): a test that
    # left "auto" behind sent later small fits in the same process to the CPU, and
    # test_remote's embedded-vs-server checks then compared the CPU with the GPU
    device = gsb.get_config()["device"]
    yield
    gsb.set_config(output_type=None, gpu_memory_cap=None, device=device)


def _data(n=2400, d=6, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=8.0, size=(3, d))
    X = (centres[np.arange(n) % 3] + rng.normal(size=(n, d)) + 50.0).astype(dtype)
    y = X @ np.linspace(-1, 2, d) + 0.1 * rng.normal(size=n)
    return X, y.astype(dtype), (np.arange(n) % 3).astype(np.int64)


# ---- CPU DLPack and the CUDA array interface, without a GPU --------------------------

class DLPackOnly:
    """A producer that speaks only DLPack (numpy's own __dlpack__ underneath)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None, **kw):
        return self._a.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class FakeDeviceArray:
    """The CUDA array interface over host memory, with Numba's copy_to_host: recognised as
    a device array; a session without a GPU copies it to the host with copy_to_host."""

    def __init__(self, a, stream="absent"):
        self._a = a
        self.copies = 0
        self.__cuda_array_interface__ = {
            "shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False),
            "strides": None if a.flags.c_contiguous else a.strides, "version": 3}
        if stream != "absent":
            self.__cuda_array_interface__["stream"] = stream

    def copy_to_host(self):
        self.copies += 1
        return self._a.copy()


def test_cpu_dlpack_is_read_without_a_copy():
    X, _, _ = _data()
    view = as_array(DLPackOnly(X), "X")
    assert isinstance(view, np.ndarray) and np.shares_memory(view, X)
    a = StandardScaler().fit(X)
    b = StandardScaler().fit(DLPackOnly(X))
    np.testing.assert_array_equal(a.mean_, b.mean_)
    np.testing.assert_array_equal(a.transform(X), b.transform(DLPackOnly(X)))


def test_cuda_array_interface_is_recognised():
    X, _, _ = _data(n=50)
    dev = as_array(FakeDeviceArray(X), "X")
    assert isinstance(dev, _devarray.DeviceArray)
    assert dev.shape == X.shape and dev.dtype == X.dtype and dev.ndim == 2 and len(dev) == 50
    assert dev._stream == gsb._lib.STREAM_LEGACY  # v2-style: ordered after the legacy stream
    assert as_array(FakeDeviceArray(X, None), "X")._stream == gsb._lib.STREAM_NONE
    assert as_array(FakeDeviceArray(X, 7), "X")._stream == 7
    with pytest.raises(TypeError, match="GPU memory"):
        np.asarray(dev)
    # a dtype the engine does not take goes through the host and numpy's rules
    half = as_array(FakeDeviceArray(X.astype(np.float16)), "X")
    assert isinstance(half, np.ndarray) and half.dtype == np.float32
    with pytest.raises(ValueError, match="Found array with dim 3"):
        as_array(FakeDeviceArray(np.zeros((2, 2, 2))), "X")


def test_device_arrays_on_a_session_without_gpu_are_copied_once():
    gsb.set_config(device="cpu")
    X, y, labels = _data()
    fx = FakeDeviceArray(X)
    a = LinearRegression().fit(X, y)
    b = LinearRegression().fit(fx, FakeDeviceArray(y))
    assert fx.copies == 1
    np.testing.assert_allclose(b.coef_, a.coef_, rtol=1e-12)
    np.testing.assert_array_equal(b.predict(FakeDeviceArray(X)), a.predict(X))
    clf = KNeighborsClassifier(n_neighbors=3).fit(FakeDeviceArray(X),
                                                  FakeDeviceArray(labels))
    assert clf.score(FakeDeviceArray(X), FakeDeviceArray(labels)) > 0.9
    h = gsb.put(FakeDeviceArray(X))
    np.testing.assert_allclose(PCA(2).fit(h).components_, PCA(2).fit(X).components_)


def test_unknown_device_producer_says_what_to_do():
    class Opaque:
        __cuda_array_interface__ = {"shape": (2, 2), "typestr": "<f8", "data": (8, False),
                                    "version": 2}
    gsb.set_config(device="cpu")
    with pytest.raises(TypeError, match="copy it to a numpy array first"):
        StandardScaler().fit(Opaque())


# ---- output types ----------------------------------------------------------------------

def test_output_type_numpy_by_default_and_pandas_on_request():
    X, y, _ = _data()
    lin = LinearRegression().fit(X, y)
    assert type(lin.predict(X)) is np.ndarray and type(lin.coef_) is np.ndarray
    gsb.set_config(output_type="pandas")
    assert gsb.get_config()["output_type"] == "pandas"
    assert isinstance(lin.predict(X), pd.Series) and isinstance(lin.coef_, pd.Series)
    pca = PCA(n_components=2).fit(X)
    assert isinstance(pca.transform(X), pd.DataFrame)
    assert isinstance(pca.components_, pd.DataFrame)
    # gsb's own code inside a call sees numpy (score calls predict)
    assert lin.score(X, y) == pytest.approx(LinearRegression().fit(X, y).score(X, y))
    gsb.set_config(output_type="input")
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    lin = LinearRegression().fit(df, y)
    assert isinstance(lin.predict(df), pd.Series) and isinstance(lin.coef_, pd.Series)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        assert type(lin.predict(X)) is np.ndarray  # each call mirrors its input
    gsb.set_config(output_type=None)
    assert type(lin.coef_) is np.ndarray and gsb.get_config()["output_type"] == "numpy"


def test_output_type_errors():
    with pytest.raises(ValueError, match="output_type must be one of"):
        gsb.set_config(output_type="xml")
    for lib in ("cupy", "torch"):
        if importlib.util.find_spec(lib) is None:
            with pytest.raises(ImportError, match=f"needs the {lib} package"):
                gsb.set_config(output_type=lib)
    assert gsb.get_config()["output_type"] == "numpy"


# ---- out of core: a memory cap of a quarter of X, on whatever device the session has ----

def _capped(X):
    gsb.set_config(gpu_memory_cap=X.nbytes // 4)
    info = gsb.session_info()
    assert info["memory_cap"] == X.nbytes // 4
    return info


def _uncapped():
    gsb.set_config(gpu_memory_cap=None)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_out_of_core_equals_in_memory(dtype):
    X, y, _ = _data(dtype=dtype)
    rtol, atol = (1e-8, 1e-10) if dtype == np.float64 else (1e-3, 1e-3)
    init = X[[0, 1, 2]]
    ref = {"km": KMeans(3, init=init, n_init=1).fit(X), "lin": LinearRegression().fit(X, y),
           "ridge": Ridge(alpha=[2.0]).fit(X, y),
           # the streamed covariance is summed in float64 about a shift; the in-memory
           # float32 one (covariance_eigh: X^T X - n m m^T in float32) loses ~1e-3 of the
           # third component here, so float32 is checked against float64 on the same values
           "pca": PCA(3).fit(X.astype(np.float64)),
           "tsvd": TruncatedSVD(3, algorithm="arpack").fit(X),
           "ss": StandardScaler().fit(X), "mm": MinMaxScaler().fit(X),
           "nn": NearestNeighbors(n_neighbors=4).fit(X)}
    _capped(X)
    km = KMeans(3, init=init, n_init=1).fit(X)
    np.testing.assert_array_equal(km.labels_, ref["km"].labels_)
    assert km.n_iter_ == ref["km"].n_iter_
    np.testing.assert_allclose(km.cluster_centers_, ref["km"].cluster_centers_, rtol=1e-5)
    np.testing.assert_array_equal(km.predict(X), ref["km"].predict(X))
    np.testing.assert_allclose(LinearRegression().fit(X, y).coef_, ref["lin"].coef_, rtol=rtol)
    np.testing.assert_allclose(Ridge(alpha=[2.0]).fit(X, y).coef_, ref["ridge"].coef_,
                               rtol=rtol)
    pca = PCA(3).fit(X)
    np.testing.assert_allclose(pca.components_, ref["pca"].components_, rtol=1e-5 if
                               dtype == np.float32 else rtol, atol=1e-6 if dtype == np.float32
                               else atol)
    np.testing.assert_allclose(pca.explained_variance_, ref["pca"].explained_variance_,
                               rtol=1e-5 if dtype == np.float32 else rtol)
    tsvd = TruncatedSVD(3, algorithm="arpack").fit(X)
    np.testing.assert_allclose(tsvd.singular_values_, ref["tsvd"].singular_values_, rtol=rtol)
    np.testing.assert_allclose(StandardScaler().fit(X).var_, ref["ss"].var_, rtol=1e-6)
    np.testing.assert_array_equal(MinMaxScaler().fit(X).data_max_, ref["mm"].data_max_)
    nn = NearestNeighbors(n_neighbors=4).fit(X)
    np.testing.assert_array_equal(nn.kneighbors(X[:300])[1], ref["nn"].kneighbors(X[:300])[1])
    np.testing.assert_array_equal(nn.kneighbors()[1], ref["nn"].kneighbors()[1])


# NaN / infinity in a streamed X: the fit checks each batch as it lands (not a host pass
# over X first), with scikit-learn's message wherever the value sits, and a fitted
# estimator stays as it was
_OOC_FITS = {
    "LinearRegression": (lambda: LinearRegression(), "coef_", True),
    "Ridge": (lambda: Ridge(alpha=2.0), "coef_", True),
    "PCA": (lambda: PCA(2), "components_", False),
    "TruncatedSVD": (lambda: TruncatedSVD(2, algorithm="arpack"), "singular_values_", False),
    "KMeans": (lambda: KMeans(3, n_init=1, random_state=0), "cluster_centers_", False),
}


@pytest.mark.parametrize("name", sorted(_OOC_FITS))
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("value", ["nan", "inf", "inf and nan"])
def test_out_of_core_nonfinite_in_any_batch(name, where, value):
    make, attr, with_y = _OOC_FITS[name]
    X, y, _ = _data()
    target = y if with_y else None
    _capped(X)
    est = make().fit(X, target)
    before = getattr(est, attr).copy()
    row = {"first": 0, "middle": len(X) // 2, "last": len(X) - 1}[where]
    bad = X.copy()
    bad[row, 2] = np.inf if value == "inf" else np.nan
    if value == "inf and nan":  # an infinity before the NaN: scikit-learn names the NaN
        bad[0 if row else 1, 4] = -np.inf
    message = ("Input X contains infinity or a value too large for dtype\\('float64'\\)"
               if value == "inf" else "Input X contains NaN")
    with pytest.raises(ValueError, match=message):
        est.fit(bad, target)
    np.testing.assert_array_equal(getattr(est, attr), before)
    if hasattr(est, "predict"):  # still fitted
        assert est.predict(X[:5]).shape == (5,)


def test_out_of_core_refusal_is_clear():
    X, _, labels = _data()
    _capped(X)
    with pytest.raises(MemoryError, match="LogisticRegression.fit cannot stream"):
        LogisticRegression().fit(X, labels)
    ss = StandardScaler().fit(X)  # streams; its transform does not
    with pytest.raises(MemoryError, match="does not fit in the"):
        ss.transform(X)
    assert ss.transform(X[:10]).shape == (10, X.shape[1])


def test_memory_cap_config():
    with pytest.raises(ValueError, match="is not a size"):
        gsb.set_config(gpu_memory_cap="12Q")
    with pytest.raises(TypeError, match="number of bytes"):
        gsb.set_config(gpu_memory_cap=1.5)
    gsb.set_config(gpu_memory_cap="1.5G")
    assert gsb.get_config()["gpu_memory_cap"] == "1.5G"
    assert gsb.session_info()["memory_cap"] == 1610612736
    gsb.set_config(gpu_memory_cap=0)
    assert "memory_cap" not in gsb.session_info()


# ---- on a GPU: CuPy and PyTorch CUDA inputs ---------------------------------------------

def _gpu_session():
    info = gsb.session_info()
    if not info.get("gpu") or info.get("device") == "cpu":
        pytest.skip("the session has no GPU")
    return info


def _cupy():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device for CuPy")
    except cp.cuda.runtime.CUDARuntimeError:
        pytest.skip("no CUDA device for CuPy")
    return cp


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for PyTorch")
    return torch


def _h2d():
    return gsb.session_info()["copies"]["h2d_bytes"]


# (class, params, y: None / "y" / "labels", methods, X never uploaded)
CASES = [
    (StandardScaler, {}, None, ("transform",), True),
    (MinMaxScaler, {}, None, ("transform",), True),
    (PCA, {"n_components": 3}, None, ("transform",), True),
    (TruncatedSVD, {"n_components": 3, "random_state": 0}, None, ("transform",), True),
    (KMeans, {"n_clusters": 3, "random_state": 0}, None, ("predict", "transform"), True),
    (LinearRegression, {}, "y", ("predict",), True),
    (Ridge, {"alpha": 3.0}, "y", ("predict",), True),
    (LogisticRegression, {}, "labels", ("predict_proba",), True),
    # the index is fitted state, on the host: each query uploads it (docs/CUDA.md)
    (NearestNeighbors, {"n_neighbors": 4}, None, ("kneighbors",), False),
    (KNeighborsClassifier, {"n_neighbors": 4}, "labels", ("predict",), False),
]


def _compare(cls, params, ykind, methods, in_place, to_device, dtype):
    X, y, labels = _data(n=60000, d=16, dtype=dtype)
    target = {None: None, "y": y, "labels": labels}[ykind]
    ref = cls(**params).fit(X, target)
    Xd = to_device(X)
    before = _h2d()
    est = cls(**params).fit(Xd, None if target is None else to_device(target))
    outs = [getattr(est, m)(Xd) for m in methods]
    moved = _h2d() - before
    if in_place:  # y and the model's state may go up, X never
        assert moved < X.nbytes / 4, (cls.__name__, moved, X.nbytes)
    rtol = 1e-10 if dtype == np.float64 else 1e-5
    for m, out in zip(methods, outs):  # numpy: gsb's default output type
        np.testing.assert_allclose(np.asarray(out), np.asarray(getattr(ref, m)(X)), rtol=rtol,
                                   atol=1e-6, err_msg=f"{cls.__name__}.{m}")
    return est, ref


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=[c[0].__name__ for c in CASES])
def test_gpu_arrays_cupy_input(case, dtype):
    cp = _cupy()
    _gpu_session()
    _compare(*case, to_device=cp.asarray, dtype=dtype)


@pytest.mark.parametrize("case", CASES, ids=[c[0].__name__ for c in CASES])
def test_gpu_arrays_torch_input(case):
    torch = _torch_cuda()
    _gpu_session()
    _compare(*case, to_device=lambda a: torch.from_numpy(a).to("cuda"), dtype=np.float32)


def test_gpu_arrays_output_types():
    cp = _cupy()
    _gpu_session()
    import cuml
    X, y, _ = _data(n=5000, d=8, dtype=np.float32)
    Xd, yd = cp.asarray(X), cp.asarray(y)
    # the shim: 'input' by default (CuPy in, CuPy out; fitted attributes too)
    lin = cuml.linear_model.LinearRegression().fit(Xd, yd)
    assert isinstance(lin.predict(Xd), cp.ndarray) and isinstance(lin.coef_, cp.ndarray)
    assert type(lin.predict(X)) is np.ndarray
    km = cuml.cluster.KMeans(n_clusters=3, random_state=0).fit(Xd)
    assert isinstance(km.labels_, cp.ndarray) and isinstance(km.cluster_centers_, cp.ndarray)
    with cuml.using_output_type("numpy"):
        assert type(km.predict(Xd)) is np.ndarray
    # gsb: numpy by default, the input's type on request
    g = LinearRegression().fit(Xd, yd)
    assert type(g.predict(Xd)) is np.ndarray and type(g.coef_) is np.ndarray
    gsb.set_config(output_type="input")
    assert isinstance(g.predict(Xd), cp.ndarray) and isinstance(g.coef_, cp.ndarray)
    gsb.set_config(output_type="cupy")
    assert isinstance(g.predict(X), cp.ndarray)


def test_gpu_arrays_torch_output_follows_the_device():
    torch = _torch_cuda()
    _gpu_session()
    X, y, _ = _data(n=5000, d=8, dtype=np.float32)
    Xt, yt = torch.from_numpy(X).cuda(), torch.from_numpy(y).cuda()
    gsb.set_config(output_type="input")
    lin = LinearRegression().fit(Xt, yt)
    pred = lin.predict(Xt)
    assert isinstance(pred, torch.Tensor) and pred.is_cuda
    assert isinstance(lin.coef_, torch.Tensor) and lin.coef_.is_cuda
    cpu_pred = lin.predict(torch.from_numpy(X))  # a CPU tensor in: a CPU tensor out
    assert isinstance(cpu_pred, torch.Tensor) and not cpu_pred.is_cuda
    Xg = torch.from_numpy(X).cuda().requires_grad_(True)  # detached, not copied
    np.testing.assert_allclose(StandardScaler().fit(Xg).mean_.cpu().numpy(), X.mean(0),
                               rtol=1e-5)


def test_gpu_arrays_nan_found_on_the_device():
    cp = _cupy()
    _gpu_session()
    X, _, _ = _data(n=1000, dtype=np.float32)
    X[17, 3] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        PCA(2).fit(cp.asarray(X))


def test_gpu_arrays_strided_and_fortran():
    cp = _cupy()
    _gpu_session()
    X, _, _ = _data(n=4000, dtype=np.float64)
    ref = StandardScaler().fit(X).mean_
    for Xd in (cp.asfortranarray(cp.asarray(X)), cp.asarray(np.repeat(X, 2, axis=0))[::2],
               cp.asarray(X.astype(np.int64))):
        np.testing.assert_allclose(StandardScaler().fit(Xd).mean_,
                                   ref if Xd.dtype != cp.int64 else
                                   X.astype(np.int64).mean(0), rtol=1e-12)


def test_gpu_out_of_core_equals_in_memory():
    _gpu_session()
    X, y, _ = _data(n=200000, d=32, dtype=np.float32)
    init = X[[0, 1, 2]]
    ref_km = KMeans(3, init=init, n_init=1, max_iter=50).fit(X)
    ref_lin = LinearRegression().fit(X, y)
    ref_pca = PCA(4).fit(X.astype(np.float64))  # see test_out_of_core_equals_in_memory
    _capped(X)
    before = gsb.session_info()["copies"]["h2d_count"]
    km = KMeans(3, init=init, n_init=1, max_iter=50).fit(X)
    assert gsb.session_info()["copies"]["h2d_count"] - before >= 8  # batches
    np.testing.assert_array_equal(km.labels_, ref_km.labels_)
    np.testing.assert_allclose(LinearRegression().fit(X, y).coef_, ref_lin.coef_, rtol=1e-3)
    np.testing.assert_allclose(PCA(4).fit(X).explained_variance_,
                               ref_pca.explained_variance_, rtol=1e-5)


@pytest.mark.parametrize("where", [0, 100_000, 199_999])
def test_gpu_out_of_core_nonfinite_found_on_the_device(where):
    _gpu_session()
    X, y, _ = _data(n=200000, d=32, dtype=np.float32)
    ref = LinearRegression().fit(X, y)
    _capped(X)
    lin = LinearRegression().fit(X, y)
    X[where, 7] = np.nan
    before = gsb.session_info()["copies"]
    with pytest.raises(ValueError, match="Input X contains NaN"):
        lin.fit(X, y)
    moved = gsb.session_info()["copies"]["h2d_bytes"] - before["h2d_bytes"]
    # the batches up to the bad one went through the ring: no host pass found it first
    assert moved >= (X.nbytes if where == len(X) - 1 else 1)
    assert moved < X.nbytes // 2 or where > 0
    np.testing.assert_allclose(lin.coef_, ref.coef_, rtol=1e-3)
    X[where, 7] = np.inf
    with pytest.raises(ValueError, match="Input X contains infinity"):
        PCA(4).fit(X)
