"""scikit-learn's own estimator checks on every gsb estimator.

Expected failures are (a) the ones scikit-learn itself declares for its
estimator of the same name (its PER_ESTIMATOR_XFAIL_CHECKS, with its reasons),
and (b) GSB_EXPECTED_FAILURES below, each with the reason it is justified.
docs/ESTIMATOR_CHECKS.md lists them for users.
"""
import warnings

import pytest
from sklearn.utils import all_estimators
from sklearn.utils.estimator_checks import parametrize_with_checks

from gsb._registry import ALL

# gsb-specific expected failures: {estimator: {check: reason}}
GSB_EXPECTED_FAILURES = {}


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
