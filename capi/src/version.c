#include <reshard/reshard.h>

#define RS_STR2(x) #x
#define RS_STR(x) RS_STR2(x)

unsigned rs_version_number(void) { return RS_VERSION_NUMBER; }
unsigned rs_version_major(void) { return RS_VERSION_MAJOR; }
unsigned rs_version_minor(void) { return RS_VERSION_MINOR; }
unsigned rs_version_patch(void) { return RS_VERSION_PATCH; }
const char *rs_version_string(void) {
  return RS_STR(RS_VERSION_MAJOR) "." RS_STR(RS_VERSION_MINOR) "." RS_STR(
      RS_VERSION_PATCH);
}
