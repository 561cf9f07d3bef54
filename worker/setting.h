/* Settings from the environment. */
#ifndef HVD_SETTING_H
#define HVD_SETTING_H

/* A 0/1 setting: dflt when unset or empty, else whether its number is
 * nonzero. */
int hvd__env_flag(const char *name, int dflt);

#endif
