#!/bin/sh
echo "bazel coverage is not supported in this offline workspace" >&2
exit 1
