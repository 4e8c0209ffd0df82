"""identity_digest: the one hash of a JSON identity, equal to the fingerprints states hold."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataset_kit._identity import identity_digest

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=4),
    max_leaves=12)


@given(identity=_json)
def test_the_digests_are_the_ones_recorded_states_hold(identity):
    # The formulas the mixture, the rank order and the dataset fingerprint
    # used before they shared this helper: a saved state must still match.
    text = json.dumps(identity, sort_keys=True, default=str)
    assert identity_digest(identity, "sha256").hex() == \
        hashlib.sha256(text.encode()).hexdigest()[:16]
    assert identity_digest(identity, "blake2b") == \
        hashlib.blake2b(text.encode(), digest_size=8).digest()
    assert identity_digest(identity, "sha256", strict=True) == \
        identity_digest(identity, "sha256")


def test_a_value_that_is_not_json_counts_as_its_str_unless_strict():
    assert identity_digest({"a": {1, 2}}, "sha256") == identity_digest({"a": "{1, 2}"},
                                                                      "sha256")
    with pytest.raises(TypeError, match="set"):
        identity_digest({"a": {1, 2}}, "sha256", strict=True)
    with pytest.raises(ValueError, match="algorithm must be one of"):
        identity_digest([], "md5")
