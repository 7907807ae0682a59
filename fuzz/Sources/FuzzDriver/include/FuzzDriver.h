#ifndef FUZZ_DRIVER_H
#define FUZZ_DRIVER_H
#include <stddef.h>
#include <stdint.h>

/// Runs libFuzzer on `test_one_input` with the process's arguments (libFuzzer's own driver,
/// LLVMFuzzerRunDriver). The fuzz targets call it from their entry point: SwiftPM names an
/// executable's entry `<module>_main` and aliases `main` to it, which leaves no room for
/// libFuzzer's own `main`.
int FuzzDriver_run(int argc, char **argv, int (*test_one_input)(const uint8_t *data, size_t size));

#endif
