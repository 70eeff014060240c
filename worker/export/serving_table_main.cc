// Prints the presets x formats x consumers table of docs/export.md.
#include <iostream>

#include "worker/export/serving_table.h"

int main() {
  std::cout << quantd::exporter::ServingTableMarkdown();
  return 0;
}
