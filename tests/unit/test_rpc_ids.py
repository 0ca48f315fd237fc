"""Ids 7 and 7.0 are one id in flight (issue 36, Low 11): a JavaScript client (one number
type) cannot tell them apart, so the in-flight bookkeeping and $/cancelRequest key an
integer-valued float id as that integer; the answer still carries the id as sent."""

from __future__ import annotations

from autodoc.rpc.dispatch import id_key


def test_an_integer_valued_float_id_is_that_integer():
    assert id_key(7) == id_key(7.0)
    assert id_key(0) == id_key(-0.0)
    assert id_key(10**20) == id_key(1e20)


def test_other_ids_stay_apart():
    assert id_key(7) != id_key("7")
    assert id_key(7) != id_key(7.5)
    assert id_key("7.0") != id_key(7.0)
    assert id_key(None) != id_key(0)
