// version.h — the version of pivfarm, printed by every program's --version.
#ifndef COMMON_VERSION_H
#define COMMON_VERSION_H
#define PIVFARM_VERSION "0.1.0"
#endif
