"""hub_fuzz_test: one libFuzzer target, also a regression test.

Plain and --config=asan builds replay the checked-in corpus
(tests/fuzz/<corpus>/, seeds and every crash found) through the target;
--config=fuzz builds link libFuzzer and fuzz for $HUB_FUZZ_SECONDS (5 by
default) starting from that corpus. See tests/fuzz/fuzz_main.cc.
"""

def hub_fuzz_test(name, srcs, deps, corpus, size = "medium", tags = []):
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        args = ["tests/fuzz/" + corpus],
        data = native.glob([corpus + "/**"]),
        # Static: the corpus replayer's main (plain builds) and
        # LLVMFuzzerInitialize (fuzz builds) must be in the binary itself.
        linkstatic = True,
        linkopts = select({
            "//tests/fuzz:libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        tags = ["fuzz"] + tags,
        deps = deps + ["//tests/fuzz:fuzz_main"],
    )
