#!/bin/sh
# Coverage is not collected through Bazel in quantd.
exit 0
