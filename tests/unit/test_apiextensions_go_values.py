"""Go's view of decoded custom-resource values (kubewire.server.apiextensions.schemas.go_values)."""

from __future__ import annotations

import pytest

from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.go_values import json_key


# listtype.validateListSet and the enum message print compound values with json.Marshal:
# expected texts follow Go 1.23's encoding/json (encode.go).
@pytest.mark.parametrize(("value", "text"), [
    # floatEncoder: 'f' for 1e-6 <= |f| < 1e21, else 'e' with a one-digit negative exponent
    ([1.5e-5, 1e-7, 1e20, 1e21, 2.0], "[0.000015,1e-7,100000000000000000000,1e+21,2]"),
    # appendString with escapeHTML; controls as \u00XX (not %q's \x01); U+2028 escaped
    ({"a": "<\x01\u2028"}, '{"a":"\\u003c\\u0001\\u2028"}'),
    # map keys sorted; ints as int64
    ({"b": [1, None, True], "a": {}}, '{"a":{},"b":[1,null,true]}'),
])
def test_json_key_is_json_marshal(value: JSON, text: str) -> None:
    assert json_key(value) == text
