"""Errors with messages meant for the person running hpcstage."""


class HpcstageError(Exception):
    """Base class: the message is one line, fit to show to a user as is."""


class InputError(HpcstageError):
    """The request itself is wrong (bad URL, bad option, malformed execution input)."""


class BucketError(HpcstageError):
    """The bucket cannot be listed (missing, access denied, wrong region)."""


class IncompleteInventoryError(HpcstageError):
    """The listed ranges do not cover the key space exactly once: a count would be wrong, so none is given."""


class AccessDeniedError(BucketError):
    """S3 refused a LIST request: the message names what could not be listed (bucket, range or prefix)."""
