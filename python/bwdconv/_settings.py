"""One rule for every setting: a bad value is an error that names the variable
or argument and its allowed values, raised where the value is given.

- An argument (enable(autotune=...), force_strategy(...)) raises when the
  function is called: TypeError for a value of the wrong type, ValueError for
  one outside the allowed set.
- A BWDCONV_* variable is read when bwdconv is imported; a bad one makes the
  import raise one ValueError that names each bad variable. The doctor
  (python -m bwdconv, bwdconv-doctor) imports bwdconv without raising, so that
  it can report them (bwdconv.doctor).
"""

import math
import os
import sys

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def flag(name, value):
    """An on/off variable's text as a bool; one of TRUE_WORDS or FALSE_WORDS,
    in any case."""
    text = value.strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ValueError(f"{name}={value!r}: expected one of {', '.join(TRUE_WORDS + FALSE_WORDS)}")


def choice(name, value, allowed):
    """`value`, one of `allowed` (for a variable or an argument)."""
    if value not in allowed:
        raise ValueError(f"{name}={value!r}: expected one of {', '.join(map(str, allowed))}")
    return value


def choice_of(*allowed):
    """A parser, for from_environment, of a variable that takes one of `allowed`."""
    return lambda name, value: choice(name, value, allowed)


def seconds(name, value):
    """A positive, finite number of seconds."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{name}={value!r}: expected a number of seconds above 0")
    return number


def from_environment(name, parse, default):
    """The variable `name` parsed by parse(name, text), or `default` when it
    is unset or empty."""
    text = os.environ.get(name)
    return default if not text else parse(name, text)


def each(*readers):
    """The results of calling each reader; one ValueError naming every bad
    value where some raise."""
    results, errors = [], []
    for read in readers:
        try:
            results.append(read())
        except ValueError as error:
            errors.append(str(error))
    if errors:
        raise ValueError("\n  ".join(errors))
    return results


def bool_argument(function, name, value, optional=False):
    """True or False (or None, where `optional`) for argument `name` of
    `function`."""
    if isinstance(value, bool) or (optional and value is None):
        return value
    allowed = "True, False or None" if optional else "True or False"
    raise TypeError(f"{function}(): {name} must be {allowed}, not {value!r}")


def environment_errors(appliers):
    """Runs each function that applies some of the environment's variables;
    the messages of those that found a bad value."""
    errors = []
    for apply in appliers:
        try:
            apply()
        except ValueError as error:
            errors.append(str(error))
    return errors


def doctor_is_starting():
    """Whether this process is the doctor (python -m bwdconv, bwdconv-doctor),
    which reports bad settings instead of failing on them."""
    argv = getattr(sys, "orig_argv", sys.argv)
    return ("-m" in argv and argv[argv.index("-m") + 1:][:1] == ["bwdconv"]) or \
        os.path.basename(sys.argv[0] if sys.argv else "") == "bwdconv-doctor"


def raise_environment_errors(errors):
    if errors:
        raise ValueError("bwdconv: bad settings in the environment (python -m bwdconv "
                         "reports them):\n  " + "\n  ".join(errors))
