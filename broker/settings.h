// settings.h — the settings recorded in the store applied at start-up
// (settings.c).

#ifndef BROKER_SETTINGS_H
#define BROKER_SETTINGS_H

#include "broker/stages.h"

// Applies the settings recorded in the store (rate, policy, pause,
// feedback, calibration, mask, PIV settings, pairing rules) at start-up,
// the experiments it knows loaded first; before the files waiting are
// offered to the pairing rules again. 0, or -1 on a store error.
int settings_load (const stages_t *stages);

#endif
