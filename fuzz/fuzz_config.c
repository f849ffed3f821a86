// fuzz_config.c — config_load (common/config.c) on arbitrary files. A file
// that loads leaves absolute paths and values within their buffers; one
// that does not leaves the defaults and a message.

#include "common/config.h"
#include "fuzz/fuzz.h"
#include "piv/calib.h"
#include "piv/settings.h"

#include <string.h>

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    config_rules ("piv", piv_settings_check_key);
    config_rules ("calibration", piv_calib_check_key);
    const char *path = fuzz_file (data, size);
    config_t cfg, defaults;
    char err[1024] = "";
    config_init (&defaults);
    if (config_load (&cfg, path, err, sizeof err) != 0) {
        FUZZ_ASSERT (err[0] && memcmp (&cfg, &defaults, sizeof cfg) == 0);
        return 0;
    }
    FUZZ_ASSERT (cfg.broker.store[0] == '/' && cfg.watcher.root[0] == '/'
                 && cfg.agent.results[0] == '/');
    FUZZ_ASSERT (memchr (cfg.agent.processor, '\0', sizeof cfg.agent.processor));
    return 0;
}
