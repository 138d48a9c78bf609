"""Exceptions with messages meant for users."""


class FastCoderError(Exception):
    """Base class: the message is shown to the user as is."""


class ModelError(FastCoderError):
    """A model could not be resolved, fetched, verified or loaded."""


class DatastoreError(FastCoderError):
    """A token datastore is foreign, corrupt or unusable."""
