"""What both browser tests need before they start: selenium, Debian's chromium and chromedriver.

require_browser() re-executes the test under /usr/bin/python3 when the running interpreter (pyenv,
a venv) cannot import selenium, since Debian's python3-selenium belongs to the system interpreter,
and exits with SKIP (77, which ctest reports as skipped) when something is missing. It returns the
arguments the test was given: (ATTN binary, artifact folder), from the environment or argv.
"""
import os
import sys

SKIP = 77
CHROMIUM = os.environ.get("ATTN_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("ATTN_CHROMEDRIVER", "/usr/bin/chromedriver")


def skip(why):
    print("SKIP: " + why)
    sys.exit(SKIP)


def require_browser():
    try:
        import selenium  # noqa: F401
    except ImportError:
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and \
                os.access("/usr/bin/python3", os.X_OK) and not os.environ.get("ATTN_BROWSER_REEXEC"):
            os.environ["ATTN_BROWSER_REEXEC"] = "1"
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        skip("browser tests need the Python package selenium (Debian: python3-selenium; "
             "scripts/install-deps.sh installs it when ATTN_BROWSER_TESTS=1)")
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not os.access(exe, os.X_OK):
            skip("browser tests need " + exe + " (Debian: chromium, chromium-driver; "
                 "scripts/install-deps.sh installs them when ATTN_BROWSER_TESTS=1)")
    attn = os.environ.get("ATTN_CLI") or (sys.argv[1] if len(sys.argv) > 1 else "")
    artifacts = os.environ.get("ATTN_ARTIFACTS") or (sys.argv[2] if len(sys.argv) > 2 else "")
    del sys.argv[1:]  # unittest.main() reads the rest
    return attn, artifacts
