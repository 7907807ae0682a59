"""Test helpers for apns-mock, a local imitation of Apple's Push Notification service.

- ``apns_mock.testcontainers.ApnsMockContainer``: the mock's container image as a Testcontainers
  container (needs the ``testcontainers`` package: ``pip install "./clients/python[testcontainers]"``).
"""

__version__ = "0.3.0"
