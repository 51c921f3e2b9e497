"""The engine's warnings as scikit-learn's: each iterative estimator that scikit-learn
warns about (ConvergenceWarning, RuntimeWarning, FutureWarning) warns with the same
category and message, embedded and through gsbd, and stays silent where scikit-learn is."""
import gc
import os
import warnings

import numpy as np
import pytest
import sklearn.cluster as skc
import sklearn.linear_model as skl
import sklearn.svm as sks
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning

import gsb
import gsb.cluster as gc_
import gsb.linear_model as gl
import gsb.server
import gsb.svm as gsv

X_IRIS, Y_IRIS = load_iris(return_X_y=True)
DUPS = np.repeat([[0.0, 0.0], [5.0, 5.0]], 4, axis=0)

# (gsb estimator, scikit-learn estimator, fit arguments)
CASES = {
    "logistic_max_iter": (lambda: gl.LogisticRegression(max_iter=2),
                          lambda: skl.LogisticRegression(max_iter=2), (X_IRIS, Y_IRIS), {}),
    "logistic_newton_cg_name": (lambda: gl.LogisticRegression(max_iter=3, solver="newton-cg"),
                           None, (X_IRIS, Y_IRIS), {}),
    "svc_max_iter": (lambda: gsv.SVC(max_iter=3), lambda: sks.SVC(max_iter=3),
                     (X_IRIS, Y_IRIS), {}),
    "svr_max_iter": (lambda: gsv.SVR(max_iter=3), lambda: sks.SVR(max_iter=3),
                     (X_IRIS, X_IRIS[:, 0]), {}),
    "svc_probability_deprecated": (lambda: gsv.SVC(probability=False),
                                   lambda: sks.SVC(probability=False), (X_IRIS, Y_IRIS), {}),
    "kmeans_duplicates": (lambda: gc_.KMeans(n_clusters=3, random_state=0),
                          lambda: skc.KMeans(n_clusters=3, random_state=0), (DUPS,), {}),
    "kmeans_explicit_init": (lambda: gc_.KMeans(n_clusters=3, init=X_IRIS[:3], n_init=5),
                             lambda: skc.KMeans(n_clusters=3, init=X_IRIS[:3], n_init=5),
                             (X_IRIS,), {}),
}


def _caught(make, args, kwargs):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        make().fit(*args, **kwargs)
    return [(w.category, str(w.message)) for w in rec]


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_warnings_as_sklearn(case):
    make_g, make_s, args, kwargs = CASES[case]
    got = _caught(make_g, args, kwargs)
    assert got, f"{case}: gsb did not warn"
    if make_s is None:  # gsb runs L-BFGS for every solver name, and says so in lbfgs's words
        assert got[0][0] is ConvergenceWarning and got[0][1].startswith("lbfgs failed")
        return
    assert got == _caught(make_s, args, kwargs)


def test_logistic_message_is_sklearns():
    [(cat, msg)] = _caught(lambda: gl.LogisticRegression(max_iter=2), (X_IRIS, Y_IRIS), {})
    assert cat is ConvergenceWarning
    assert msg == ("lbfgs failed to converge after 2 iteration(s) (status=1):\n"
                   "STOP: TOTAL NO. OF ITERATIONS REACHED LIMIT\n\n"
                   "Increase the number of iterations to improve the convergence "
                   "(max_iter=2).\nYou might also want to scale the data as shown in:\n"
                   "    https://scikit-learn.org/stable/modules/preprocessing.html\n"
                   "Please also refer to the documentation for alternative solver options:\n"
                   "    https://scikit-learn.org/stable/modules/linear_model.html"
                   "#logistic-regression")


@pytest.mark.parametrize("make", [lambda: gl.LogisticRegression(max_iter=1000),
                                  lambda: gsv.SVC(), lambda: gc_.KMeans(3, random_state=0)],
                         ids=["logistic", "svc", "kmeans"])
def test_silent_when_converged(make):
    y = Y_IRIS if not isinstance(make(), gc_.KMeans) else None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make().fit(X_IRIS, y)


def test_warning_points_at_the_caller():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        gl.LogisticRegression(max_iter=1).fit(X_IRIS, Y_IRIS)
    assert rec and rec[0].filename == __file__


def test_warning_as_error():
    """-W error::ConvergenceWarning raises, as scikit-learn would."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with pytest.raises(ConvergenceWarning, match="lbfgs failed to converge"):
            gl.LogisticRegression(max_iter=1).fit(X_IRIS, Y_IRIS)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gsbd-warn")
    srv = gsb.server.start(listen=["tcp://127.0.0.1:0", f"unix://{tmp}/s.sock"],
                           data_dir=tmp / "store", device=os.environ.get("GSB_DEVICE", "cpu"),
                           log_level="warn")
    yield srv
    gsb.connect(None)
    gc.collect()
    srv.stop()


@pytest.mark.parametrize("transport", ["tcp", "unix"])
@pytest.mark.parametrize("case", ["logistic_max_iter", "svc_max_iter", "kmeans_duplicates"])
def test_remote_sessions_warn_too(server, transport, case):
    make_g, _, args, kwargs = CASES[case]
    local = _caught(make_g, args, kwargs)
    gsb.connect(server.url_of(transport))
    try:
        remote = _caught(make_g, args, kwargs)
    finally:
        gsb.connect(None)
    assert remote == local and remote
