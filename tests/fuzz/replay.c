/*
 * replay.c — main() for a fuzz target built without libFuzzer: runs
 * LLVMFuzzerTestOneInput once on each file named on the command line, and on
 * each file of each directory named. Exits 0 when every input ran (a failing
 * input aborts, as under libFuzzer).
 */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 0;
    }
    size_t cap = 4096, size = 0;
    uint8_t *data = malloc(cap);
    size_t got;
    while (data != NULL && (got = fread(data + size, 1, cap - size, f)) > 0) {
        size += got;
        if (size == cap) {
            uint8_t *bigger = realloc(data, cap * 2);
            if (bigger == NULL) {
                free(data);
                data = NULL;
                break;
            }
            data = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (data == NULL) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return 0;
    }
    /* An exactly sized copy, so that ASan sees reads past the input's end. */
    uint8_t *exact = malloc(size > 0 ? size : 1);
    if (exact == NULL) {
        free(data);
        return 0;
    }
    memcpy(exact, data, size);
    free(data);
    LLVMFuzzerTestOneInput(exact, size);
    free(exact);
    return 1;
}

int main(int argc, char **argv) {
    long ran = 0, failed_to_read = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or directory: %s\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            int ok = replay_file(argv[i]);
            ran += ok;
            failed_to_read += !ok;
            continue;
        }
        struct dirent **entries;
        int n = scandir(argv[i], &entries, NULL, alphasort);
        if (n < 0) {
            fprintf(stderr, "replay: cannot read directory %s\n", argv[i]);
            return 1;
        }
        for (int j = 0; j < n; j++) {
            char path[4096];
            if (entries[j]->d_name[0] != '.' &&
                (size_t)snprintf(path, sizeof path, "%s/%s", argv[i], entries[j]->d_name) < sizeof path) {
                int ok = replay_file(path);
                ran += ok;
                failed_to_read += !ok;
            }
            free(entries[j]);
        }
        free(entries);
    }
    printf("replay: %ld inputs ran%s\n", ran, failed_to_read ? " (some could not be read)" : "");
    return failed_to_read ? 1 : 0;
}
