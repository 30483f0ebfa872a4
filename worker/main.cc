#include "worker/worker_main.h"

int main(int argc, char** argv) { return meshrt::WorkerMain(argc, argv); }
