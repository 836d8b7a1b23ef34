"""A driver.lease damaged on disk (a crash where renames are not atomic) is taken as absent,
as a half-written one is: the next sweep takes the store over instead of crashing."""

from __future__ import annotations

from mutransfer.results.lease import LEASE, Lease, live_holder, read_holder
from mutransfer.results.store import Store


def test_a_lease_that_is_not_utf8_is_no_holder_and_is_taken_over(tmp_path):
    store = Store(tmp_path / "results")
    store.ensure_writable()
    (tmp_path / "results" / LEASE).write_bytes(b"\xff\xfe{\"token\": ")
    assert read_holder(store) is None and live_holder(store) is None
    with Lease(store) as lease:
        assert read_holder(store).token == lease.holder.token
    assert not (tmp_path / "results" / LEASE).exists()  # released
