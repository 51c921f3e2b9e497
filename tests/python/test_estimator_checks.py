"""scikit-learn's own estimator checks on every gsb estimator.

Expected failures are (a) the ones scikit-learn itself declares for its
estimator of the same name (its PER_ESTIMATOR_XFAIL_CHECKS, with its reasons),
and (b) GSB_EXPECTED_FAILURES below, each with the reason it is justified.
docs/ESTIMATOR_CHECKS.md lists them for users.

parametrize_with_checks leaves out the checks scikit-learn runs from its own
test_common.py (feature names of DataFrames, get_feature_names_out, set_output):
the tests at the end run those the same way.
"""
import warnings

import pytest
from sklearn.utils import all_estimators
from sklearn.utils import estimator_checks as sk_checks
from sklearn.utils.estimator_checks import parametrize_with_checks

from gsb._registry import ALL

# gsb-specific expected failures: {estimator: {check: reason}}
_UMAP_TRANSFORM = ("transform of the training data is embedding_ (umap-learn's shortcut) and "
                   "other batches are optimised together (negative samples per edge of the "
                   "batch), as umap-learn's")
_UMAP_SMALL = ("n_neighbors=15 > the check's 10 samples is an error (umap-learn warns and "
               "truncates; the UMAP issue asks for an error)")
GSB_EXPECTED_FAILURES = {
    "UMAP": {
        "check_estimators_nan_inf": _UMAP_SMALL,
        "check_fit2d_1feature": _UMAP_SMALL,
        "check_transformer_preserve_dtypes": "the embedding is float32 whatever X's dtype, "
                                             "as umap-learn's",
        "check_methods_sample_order_invariance": _UMAP_TRANSFORM,
        "check_methods_subset_invariance": _UMAP_TRANSFORM,
    },
}


def _sklearn_xfails(name):
    """The expected failures scikit-learn declares for its own class of this name."""
    try:
        from sklearn.utils._test_common.instance_generator import PER_ESTIMATOR_XFAIL_CHECKS
    except ImportError:  # private module moved: fall back to our own list only
        return {}
    for sk_name, sk_cls in all_estimators():
        if sk_name == name:
            return dict(PER_ESTIMATOR_XFAIL_CHECKS.get(sk_cls, {}))
    return {}


# constructor arguments scikit-learn's own checks use for its class of the same name
# (its INIT_PARAMS), where the defaults cannot fit the checks' 20-30 samples
INIT_PARAMS = {"TSNE": {"perplexity": 2}}


def expected_failed_checks(estimator):
    name = type(estimator).__name__
    return {**_sklearn_xfails(name), **GSB_EXPECTED_FAILURES.get(name, {})}


@parametrize_with_checks([cls(**INIT_PARAMS.get(name, {})) for name, cls in sorted(ALL.items())],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        check(estimator)


# ---- the checks scikit-learn runs from its test_common.py --------------------------------

def _sklearn_class(name):
    return dict(all_estimators())[name]


def _instances(select=lambda cls: True):
    return [pytest.param(cls(**INIT_PARAMS.get(name, {})), id=name)
            for name, cls in sorted(ALL.items()) if select(cls)]


def _two_d(cls):
    from sklearn.utils import get_tags
    return get_tags(cls()).input_tags.two_d_array


@pytest.mark.parametrize("estimator", _instances(_two_d))
def test_pandas_column_name_consistency(estimator):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("ignore", FutureWarning)
        sk_checks.check_dataframe_column_names_consistency(type(estimator).__name__,
                                                           estimator)
    for warning in record:
        assert "was fitted without feature names" not in str(warning.message)


@pytest.mark.parametrize("name", sorted(ALL))
def test_get_feature_names_out_where_sklearn_has_it(name):
    if name not in dict(all_estimators()):
        pytest.skip(f"scikit-learn has no {name} (UMAP: umap-learn's, test_parity_umap.py)")
    assert hasattr(ALL[name], "get_feature_names_out") == \
        hasattr(_sklearn_class(name), "get_feature_names_out")
    assert hasattr(ALL[name](), "set_output") == hasattr(_sklearn_class(name)(), "set_output")


_WITH_NAMES_OUT = _instances(lambda cls: hasattr(cls, "get_feature_names_out"))


# the checks fit on arrays and transform DataFrames (and back) on purpose
_THEIR_WARNINGS = [pytest.mark.filterwarnings("ignore:X has feature names:UserWarning"),
                   pytest.mark.filterwarnings("ignore:X does not have valid feature names")]


@pytest.mark.parametrize("estimator", _WITH_NAMES_OUT)
@_THEIR_WARNINGS[0]
@_THEIR_WARNINGS[1]
def test_transformers_get_feature_names_out(estimator):
    name = type(estimator).__name__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        sk_checks.check_transformer_get_feature_names_out(name, estimator)
        sk_checks.check_transformer_get_feature_names_out_pandas(name, estimator)
        sk_checks.check_get_feature_names_out_error(name, estimator)


@pytest.mark.parametrize("check", [
    sk_checks.check_set_output_transform,
    sk_checks.check_set_output_transform_pandas,
    sk_checks.check_global_output_transform_pandas,
    sk_checks.check_set_output_transform_polars,
    sk_checks.check_global_set_output_transform_polars,
], ids=lambda c: c.__name__)
@pytest.mark.parametrize("estimator", _instances(lambda cls: hasattr(cls(), "set_output")))
@_THEIR_WARNINGS[0]
@_THEIR_WARNINGS[1]
def test_set_output_transform(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        check(type(estimator).__name__, estimator)
