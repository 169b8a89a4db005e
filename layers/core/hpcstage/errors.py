"""Errors with messages meant for the person running hpcstage, and the exit code each one ends with.

The exit codes follow the AWS CLI's (https://docs.aws.amazon.com/cli/latest/topic/return-codes.html),
so a script that already handles ``aws`` handles ``hpcstage`` the same way:

====  ==========================================================================================
0     success
1     the command ran but its result is not what was asked: an incomplete inventory, nothing under
      the prefix, a local state machine execution that failed
2     the command line could not be parsed (argparse: unknown option, missing argument)
130   interrupted (Ctrl-C)
252   a parameter value is wrong: bad URL, unreadable or malformed --hints/--previous/--input,
      an --out that cannot be written
253   the environment or configuration is wrong: no credentials, an unknown profile, no region
254   S3 answered with an error: no such bucket, access denied, bucket in another region, 5xx
255   anything else, including an endpoint that cannot be reached or does not answer in time
====  ==========================================================================================
"""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_PARSE = 2
EXIT_INTERRUPTED = 130
EXIT_USAGE = 252
EXIT_CONFIG = 253
EXIT_SERVICE = 254
EXIT_OTHER = 255


class HpcstageError(Exception):
    """Base class: the message is one line, fit to show to a user as is."""

    exit_code = EXIT_OTHER


class InputError(HpcstageError):
    """The request itself is wrong (bad URL, bad option, malformed execution input)."""

    exit_code = EXIT_USAGE


class ConfigError(HpcstageError):
    """The environment is wrong: credentials, profile or region; the command itself may be fine."""

    exit_code = EXIT_CONFIG


class BucketError(HpcstageError):
    """The bucket cannot be listed (missing, access denied, wrong region): S3 said no."""

    exit_code = EXIT_SERVICE


class EndpointError(HpcstageError):
    """The S3 endpoint could not be reached or did not answer within the timeouts."""

    exit_code = EXIT_OTHER


class EmptyResultError(HpcstageError):
    """Nothing to inventory: the bucket or the prefix holds no object."""

    exit_code = EXIT_FAILED


class IncompleteInventoryError(HpcstageError):
    """The listed ranges do not cover the key space exactly once: a count would be wrong, so none is given."""

    exit_code = EXIT_FAILED


class AccessDeniedError(BucketError):
    """S3 refused a LIST request: the message names what could not be listed (bucket, range or prefix)."""
