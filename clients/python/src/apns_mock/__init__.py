"""Test helpers for apns-mock, a local imitation of Apple's Push Notification service.

- ``apns_mock.AdminClient``: the admin API (what arrived, waiting for it, fault rules, devices,
  channels, the clock), standard library only.
- ``apns_mock.testcontainers.ApnsMockContainer``: the mock's container image as a Testcontainers
  container (needs the ``testcontainers`` package: ``pip install "./clients/python[testcontainers]"``).
"""

from .admin import AdminClient, AdminError, Event, EventStream, NotificationPage, WaitTimeout

__all__ = ["AdminClient", "AdminError", "Event", "EventStream", "NotificationPage", "WaitTimeout"]
__version__ = "0.4.0"
