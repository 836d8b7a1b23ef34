"""`ray_session` in a long-lived process (a notebook, the test suite): Ray >= 2.5x
authenticates with a token it caches per process, and a local sweep must still start after this
process talked to another cluster with another token (a `mutransfer submit`, then a local sweep);
a Ray that fails half-way through starting is shut down, not left behind."""

from __future__ import annotations

import uuid

import pytest

ray = pytest.importorskip("ray")
raylet = pytest.importorskip("ray._raylet")
if not hasattr(raylet, "AuthenticationTokenLoader"):
    pytest.skip("this Ray has no token authentication", allow_module_level=True)

from mutransfer.sweep.run.cluster import ray_session, refresh_ray_auth  # noqa: E402

# Ray's state in this process (its auth cache, an initialised Ray): in the Ray group, whose
# tests start in a process without Ray (tests/conftest.py)
pytestmark = pytest.mark.ray


def test_the_auth_mode_follows_the_environment_after_a_refresh(monkeypatch):
    # Ray reads RAY_AUTH_MODE once per process; a client made later must see the new value
    token_mode = raylet.AuthenticationMode.TOKEN
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    refresh_ray_auth()
    assert raylet.get_authentication_mode() == token_mode
    monkeypatch.delenv("RAY_AUTH_MODE")
    refresh_ray_auth()
    assert raylet.get_authentication_mode() != token_mode


@pytest.mark.slow
def test_a_local_ray_starts_after_another_clusters_token_was_cached(tmp_path, monkeypatch):
    assert not ray.is_initialized()
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.ray/auth_token yet: Ray makes its own
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    monkeypatch.setenv("RAY_AUTH_TOKEN", uuid.uuid4().hex)  # the other cluster's token
    loader = raylet.AuthenticationTokenLoader.instance()
    loader.reset_cache()
    assert loader.has_token(ignore_auth_mode=True)  # now cached in this process
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    monkeypatch.delenv("RAY_AUTH_MODE")

    with ray_session(num_cpus=1) as cap:
        assert cap.nodes == 1
        assert ray.get(ray.remote(lambda: 7).remote()) == 7
    assert not ray.is_initialized()


@pytest.mark.slow
def test_a_ray_that_fails_while_starting_is_shut_down(monkeypatch):
    assert not ray.is_initialized()
    real_init = ray.init

    def init_then_fail(*args, **kwargs):
        real_init(*args, **kwargs)  # processes started, then something goes wrong
        raise RuntimeError("failed after start")

    monkeypatch.setattr(ray, "init", init_then_fail)
    with pytest.raises(RuntimeError, match="failed after start"):
        with ray_session(num_cpus=1):
            pass
    assert not ray.is_initialized()


def test_a_cluster_that_refuses_the_driver_says_what_to_set_when_no_token_is_here(
        monkeypatch):
    import ray

    from mutransfer.errors import UserError
    from mutransfer.sweep.run import cluster

    def refused(**kw):
        raise ConnectionError("Failed to connect to GCS at 10.0.0.1:6379")

    monkeypatch.setattr(cluster, "probe", lambda address: None)
    monkeypatch.setattr(cluster, "enable_token_auth", lambda: False)
    monkeypatch.setattr(ray, "init", refused)
    with pytest.raises(UserError) as err:
        cluster._init(ray, "10.0.0.1:6379", None, None)
    msg = str(err.value)
    assert "\n" not in msg and "cannot connect to Ray" in msg
    assert "set RAY_AUTH_TOKEN to its token (`ray get-auth-token` on the head)" in msg
