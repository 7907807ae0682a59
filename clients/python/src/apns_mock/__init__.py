"""Test helpers for apns-mock, a local imitation of Apple's Push Notification service.

- ``apns_mock.AdminClient``: the admin API (what arrived, waiting for it, fault rules, devices,
  channels, the clock, teams), standard library only; ``AdminClient.temporary_team`` and
  ``apns_mock.tokens`` (a fresh P-256 key, ES256 provider tokens) need ``cryptography``
  (``pip install "./clients/python[teams]"``).
- ``apns_mock.testcontainers.ApnsMockContainer``: the mock's container image as a Testcontainers
  container (needs the ``testcontainers`` package: ``pip install "./clients/python[testcontainers]"``).
"""

from .admin import AdminClient, AdminError, Event, EventStream, NotificationPage, TemporaryTeam, WaitTimeout

__all__ = ["AdminClient", "AdminError", "Event", "EventStream", "NotificationPage", "TemporaryTeam", "WaitTimeout"]
__version__ = "0.5.0"
