"""Offline stand-in for @rules_cc under Debian's Bazel 4.2.3.

Bazel's built-in WORKSPACE suffix declares @rules_cc as a download, and
@bazel_tools//tools/cpp loads @rules_cc//cc:defs.bzl, so every C++ build needs
this repository. Debian's bazel-rules-cc 0.0.4 needs a newer Bazel. These
wrappers forward to the native rules, which is what rules_cc does on Bazel 4.
On a machine with the real rules_cc, point WORKSPACE at it instead; BUILD files
do not change.
"""

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_import(**attrs):
    native.cc_import(**attrs)

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def fdo_prefetch_hints(**attrs):
    native.fdo_prefetch_hints(**attrs)

def fdo_profile(**attrs):
    native.fdo_profile(**attrs)

def objc_import(**attrs):
    native.objc_import(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)
