/* A shared library without weft's plugin entry points. */
int not_a_weft_plugin(int x) { return x + 1; }
