// Prints the architectures x formats x rotation table of docs/worker.md.
#include <iostream>

#include "worker/export/architecture_table.h"

int main() {
  std::cout << quantd::exporter::ArchitectureTableMarkdown();
  return 0;
}
