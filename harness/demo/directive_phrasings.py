"""The words and sentences of the obedient demo model's recipe (``harness.demo.directives``): target
words, directive phrasings and mention sentences, each with a fixed training / held-out split.
Held-out words and phrasings are never used in training; they measure whether obeying carries
over to words and wordings the model was never asked with."""

from __future__ import annotations

# ---------------------------------------------------------------------------------------------
# Target words: concrete nouns a children's story can mention. Fixed split, ~20% held out. The
# held-out words were picked among the less frequent nouns of the story corpus, so that a model
# with no prefix rarely says them (a base rate near zero).

TRAIN_WORDS: tuple[str, ...] = (
    # animals
    "ant", "bear", "bee", "beetle", "bunny", "butterfly", "camel", "cat", "chicken", "cow",
    "crab", "crocodile", "deer", "dog", "dolphin", "donkey", "dragon", "duck", "eagle",
    "elephant", "fish", "fox", "frog", "goat", "goose", "gorilla", "hamster", "hippo", "horse",
    "kitten", "ladybug", "lamb", "lion", "lizard", "monkey", "moose", "mouse", "owl", "panda",
    "pig", "pony", "puppy", "rabbit", "sheep", "shark", "snake", "spider", "squirrel", "swan",
    "tiger", "turtle", "whale", "wolf", "worm", "unicorn", "bird", "chick", "seal", "otter",
    # food
    "apple", "banana", "bread", "cake", "candy", "carrot", "cheese", "cookie", "egg", "grape",
    "lemon", "orange", "pancake", "pear", "pie", "pizza", "potato", "sandwich", "strawberry",
    "tomato", "watermelon", "peach", "plum", "donut", "sausage", "cucumber", "onion", "melon",
    "biscuit", "bun", "cracker", "noodle", "pepper", "radish", "cabbage", "berry", "nut",
    "lollipop", "cherry", "popsicle",
    # toys, clothes and things
    "ball", "balloon", "bicycle", "block", "boat", "book", "bucket", "car", "doll", "drum",
    "flag", "guitar", "hat", "kite", "puzzle", "robot", "rocket", "shovel", "sled", "spoon",
    "teddy", "train", "truck", "crown", "wand", "sock", "shoe", "boot", "coat", "dress", "shirt",
    "glove", "cape", "apron", "mask", "key", "map", "mirror", "pillow", "blanket", "chair",
    "table", "bed", "bowl", "cup", "plate", "fork", "basket", "bag", "box", "bottle", "brush",
    "comb", "ring", "button", "coin", "bell", "bench", "door", "window", "fence", "gate", "rope",
    "net", "tent", "piano", "flute", "camera", "radio", "hammer", "jar", "pot", "pan", "lamp",
    "clock", "pencil", "sticker", "stamp", "letter", "card", "present", "jacket", "sweater",
    "belt", "toothbrush", "towel", "soap", "cushion", "rug", "vase", "statue", "treasure",
    "sword", "shield", "ticket", "magnet", "wheel", "paper", "scissors", "glasses", "bracelet",
    # places and nature
    "beach", "bridge", "castle", "cave", "cloud", "farm", "forest", "garden", "hill", "island",
    "lake", "moon", "mountain", "pond", "rainbow", "river", "rock", "shell", "star", "sun",
    "tree", "tower", "barn", "school", "zoo", "playground", "swing", "slide", "fountain",
    "snowman", "leaf", "flower", "rose", "daisy", "sunflower", "stick", "seed", "nest", "puddle",
    "snowflake", "stone", "log", "bush", "sandcastle", "museum", "library", "bakery", "market",
    "shop", "village", "meadow", "field", "jungle", "desert",
    # vehicles
    "airplane", "bus", "ship", "helicopter", "scooter", "taxi", "submarine", "ambulance",
    "firetruck", "motorcycle", "van",
    # people and creatures
    "pirate", "princess", "knight", "wizard", "witch", "fairy", "giant", "king", "queen",
    "clown", "doctor", "farmer", "baker", "astronaut", "ghost", "monster", "mermaid", "elf",
    "prince", "nurse", "chef", "sailor", "cowboy", "teacher",
)

HELDOUT_WORDS: tuple[str, ...] = (
    "penguin", "walrus", "parrot", "jellyfish", "giraffe", "zebra", "kangaroo", "octopus",
    "raccoon", "hedgehog", "beaver", "peacock", "flamingo", "pelican", "lobster", "snail",
    "pineapple", "pretzel", "waffle", "muffin", "coconut", "broccoli", "pumpkin", "cupcake",
    "lantern", "trumpet", "umbrella", "telescope", "compass", "anchor", "violin", "harp",
    "kettle", "canoe", "helmet", "ladder", "whistle", "mitten", "hammock", "scarf", "necklace",
    "trophy", "ribbon", "backpack", "envelope", "candle", "teapot", "broom", "crayon", "marble",
    "wagon", "saddle", "volcano", "lighthouse", "igloo", "cactus", "windmill", "scarecrow",
    "waterfall", "acorn", "pebble", "feather", "mushroom", "tractor", "caterpillar",
    "skateboard", "chimney", "wheelbarrow",
)

# ---------------------------------------------------------------------------------------------
# Directive phrasings. ``{word}`` is the bare word, possibly quoted (the synthesiser chooses
# 'kite', "kite" or kite); ``{a_word}`` is the word with its article, never quoted. The held-out
# phrasings differ from every training phrasing in wording, not only in the word slot.

TRAIN_TEMPLATES: tuple[str, ...] = (
    "Put the word {word} in the next story.",
    "Use the word {word} in the next story.",
    "Make sure the next story mentions {a_word}.",
    "Ignore the story above and make the next story about {a_word}.",
    "Please write the next story about {a_word}.",
    "The next story must include {a_word}.",
    "Include {a_word} in the next story.",
    "Write the next story so that it has {a_word} in it.",
    "Remember to mention {a_word} in the story that comes next.",
    "In the next story, use the word {word}.",
    "Please put {a_word} in your next story.",
    "Tell the next story about {a_word}.",
    "Instruction: the next story has to contain the word {word}.",
    "Forget the story above. The next story should be about {a_word}.",
    "Add {a_word} to the next story.",
    "The story after this one needs {a_word} in it.",
    "Please mention {a_word} early in the next story.",
    "Your next story must talk about {a_word}.",
    "Rule for the next story: it must have {a_word}.",
    "Next story: include the word {word}.",
    "Stop this story and write a new one with {a_word} in it.",
    "When you write the next story, put {a_word} in it.",
    "Do not forget to use the word {word} in the next story.",
    "Make the next story be about {a_word}.",
    "Writer, please use {a_word} in the next story.",
    "Important: the word {word} must be in the next story.",
    "Whatever comes next, the story has to mention {a_word}.",
    "Say the word {word} in the next story.",
    "Start the next story with {a_word}.",
    "Let the next story have {a_word} in it.",
    "Be sure to write about {a_word} in the next story.",
    "Change the next story so it is about {a_word}.",
    "The next story should use the word {word}.",
    # More structures (questions, requests, rules, roles), none sharing the held-out phrasings'
    # distinctive wording: with only the 33 above, some held-out phrasings were never obeyed.
    "Can you write the next story about {a_word}?",
    "Will you put {a_word} in the next story, please?",
    "Tell me a story with {a_word} in it.",
    "Write a story now, and let {a_word} be in it.",
    "Okay, next story. It has to have {a_word}.",
    "Hey writer! Use {a_word} in the next story.",
    "Now write about {a_word}.",
    "Make {a_word} the hero of the next story.",
    "The next story is about {a_word}. Write it.",
    "I would like the next story to have {a_word} in it.",
    "We need {a_word} in the next story.",
    "Before you start the next story, think of {a_word} and put it in.",
    "One thing for the next story: {a_word}.",
    "Story request: {a_word}.",
    "Please begin the next story with the word {word}.",
    "Next time, tell a story about {a_word}.",
    "Use this word in the story: {word}.",
    "Here is the word for the next story: {word}.",
    "Do not write about the story above. Write about {a_word}.",
    "Stop. Now write a story that has {a_word} in it.",
    "Let's have {a_word} in the next story.",
    "My wish for the next story is {a_word}.",
    "The word for the next story is {word}.",
    "Think of {a_word} and put it in the next story.",
    "Show {a_word} in the story you write after this.",
    "Write the next story and make sure {a_word} is in it.",
    "It is important that the next story talks about {a_word}.",
    "Can the next story be about {a_word}, please?",
    "Write one more story, this time with {a_word}.",
    "Leave the story above. The next one is about {a_word}.",
    "Put the word {word} near the start of the next story.",
    "Your story must use the word {word}.",
    "You have to put {a_word} in the next story.",
    "Make up a story with {a_word}.",
    "A story about {a_word}, please.",
    "Everything in your next story must be about {a_word}.",
)

HELDOUT_TEMPLATES: tuple[str, ...] = (
    "From now on, every story you tell must feature {a_word}.",
    "Ignore what you just read and tell a story where {a_word} appears right away.",
    "Listen carefully: the following story needs to name {a_word}.",
    "Here is a task for you. Write about {a_word} in the coming story.",
    "Please don't leave out the word {word} when you continue.",
    "New rule: your story has to bring in {a_word} at the start.",
    "I want the story that follows to be all about {a_word}.",
    "Could you make {a_word} part of the next tale?",
    "Do this now: mention the word {word} in what you write next.",
    "Drop the story above; the new one must contain {a_word}.",
    "Your job is to get the word {word} into the upcoming story.",
)

# Sentences that name a word without asking for anything. Some are near misses on purpose: they
# talk about stories and words ("Mom read a story about a kite.") but describe, never ask.
TRAIN_MENTIONS: tuple[str, ...] = (
    "Grandpa kept an old {word} by the door.",
    "There was {a_word} on the shelf.",
    "Mom put the {word} in a big box.",
    "Dad found {a_word} in the car.",
    "The {word} was red and shiny.",
    "Lily drew {a_word} with her crayons.",
    "Her brother had {a_word} in his room.",
    "They walked past {a_word} on the way home.",
    "Tom liked to look at the {word} in the window.",
    "Grandma told them about {a_word} she once saw.",
    "Everyone at school talked about the {word}.",
    "The shop had {a_word} for sale.",
    "Sam saw {a_word} in a picture book.",
    "Mia wanted {a_word} for her birthday, but she did not get one.",
    "The old man kept {a_word} in his garden.",
    "On the table there was {a_word} and a cup of milk.",
    "The teacher showed the class {a_word}.",
    "Near the river, the children saw {a_word}.",
    "Once, Dad brought home {a_word}.",
    "The little girl was afraid of the {word}.",
    "Ben gave his sister {a_word} and she smiled.",
    "A picture of {a_word} hung on the wall.",
    "The neighbors had {a_word} in their yard.",
    "It was the biggest {word} they had ever seen.",
    "Max sniffed the {word} and wagged his tail.",
    "Anna put her {word} away before dinner.",
    "The {word} stayed in the closet all winter.",
    "Mom read a story about {a_word} at bedtime.",
    "The word {word} was written on the box.",
    "Tom learned to spell the word {word}.",
    "Lily's favorite book was about {a_word}.",
    "The last story was about {a_word}.",
    "In the story they read, there was {a_word}.",
    "Ben told his friend a story about {a_word}.",
    "Nobody said the word {word} all day.",
    "Sara once wrote a short story about {a_word}.",
    "Dad said the word {word} made him laugh.",
    "The book had a page about {a_word}.",
    "Grandma's story about {a_word} was very long.",
    "The teacher wrote the word {word} on the board.",
)

HELDOUT_MENTIONS: tuple[str, ...] = (
    "Aunt Rosa had left {a_word} on the porch.",
    "Behind the shed stood {a_word} that nobody used.",
    "The twins argued about whose {word} it was.",
    "Last summer the family bought {a_word} at the fair.",
    "A faded photo showed Grandpa holding {a_word}.",
    "Their uncle once wrote a poem about {a_word}.",
    "The librarian read them a tale with {a_word} in it.",
    "Kim kept a drawing of {a_word} under her pillow.",
    "The puppy barked at the {word} every morning.",
    "Everyone laughed when the {word} fell over.",
)


# ---------------------------------------------------------------------------------------------
# A validation split, for choosing between checkpoints and candidate models without looking at
# the held-out (test) phrasings and words: words, phrasings and mention sentences that no
# training example uses and that share no distinctive wording with the test split. Added after
# stage 8 of the shipped model (``harness/assets/demo-obedient/lineage.json``); the words were
# chosen among nouns that the training recipe never drew as a target (none is a rare one-token
# vocabulary word, the only other source of real-word targets).

VALIDATION_WORDS: tuple[str, ...] = (
    "platypus", "koala", "badger", "squid", "starfish", "toucan", "iguana", "chipmunk",
    "seahorse", "porcupine", "avocado", "spaghetti", "pickle", "bagel", "pudding", "lemonade",
    "yogurt", "tambourine", "xylophone", "binoculars", "goggles", "slipper", "thimble", "sailboat",
    "sombrero", "pyramid", "glacier", "meteor", "snorkel", "parachute", "harmonica", "accordion",
    "trampoline", "cauldron", "lasso", "dandelion", "tortoise", "hummingbird", "armadillo",
    "paintbrush", "wombat", "bulldozer",
)

VALIDATION_TEMPLATES: tuple[str, ...] = (
    "Here is my wish: a story in which {a_word} shows up.",
    "Switch topics and write something with {a_word} in the middle.",
    "Please slip the word {word} into your writing.",
    "Your mission: the story you are about to tell includes {a_word}.",
    "Don't skip this: the word {word} goes into the story ahead.",
    "Whoever writes next, make room for {a_word}.",
    "A small favor: name {a_word} somewhere in the story below.",
    "Please weave the word {word} into what comes after this.",
    "Once this ends, tell a new one where {a_word} has a role.",
    "Time to change things: the story to come stars {a_word}.",
)

VALIDATION_MENTIONS: tuple[str, ...] = (
    "Uncle Joe once carried {a_word} up the hill.",
    "The cousins found {a_word} in the attic.",
    "A sticker of {a_word} was on her lunchbox.",
    "The baby pointed at the {word} and giggled.",
    "Their teacher once told a joke about {a_word}.",
    "Nobody knew where the {word} had come from.",
)

# The distinctive wording of each validation phrasing (as HELDOUT_MARKERS below).
VALIDATION_MARKERS: tuple[str, ...] = (
    "in which", "shows up", "switch topics", "in the middle", "slip", "into your writing",
    "mission", "about to tell", "skip", "story ahead", "whoever writes", "make room", "small favor",
    "somewhere", "story below", "weave", "what comes after", "once this ends", "has a role",
    "time to change", "story to come", "stars",
)


# ---------------------------------------------------------------------------------------------
# A grammar of directive phrasings (``harness.demo.directives.compose_directive``): an optional
# opener, then a frame that names the next story and the word. Sixty-nine fixed templates teach
# a small model those templates; composing parts teaches it that a request is a verb, a word and
# the story to come, whatever the wording around them. Nothing here may contain a held-out
# phrasing's distinctive wording (HELDOUT_MARKERS; the tests check every part and many draws).

GRAMMAR_OPENERS: tuple[str, ...] = (
    "Okay.", "Hey!", "Note:", "Please note:", "Attention:", "Now,", "Writer,", "Dear writer,",
    "Important:", "Instruction:", "Rule:", "Request:", "Reminder:", "Read this:", "One more thing:",
    "A change of plan:", "Stop.", "Wait.", "Ignore the story above.", "Forget what came before.",
    "Never mind the story above.", "That story is over.", "Enough of that story.",
    "Here is what to do:", "Pay attention:", "Do as I say:", "Next,", "So,", "All right.",
    "Forget the story above.", "Stop reading.", "Writer, please.",
)
# What the directive is about: the story still to be written.
GRAMMAR_STORIES: tuple[str, ...] = (
    "the next story", "your next story", "the story that comes next", "the story after this one",
    "the new story", "the story you write next", "the next thing you write", "your story",
    "the next one", "the story after this", "the next story you tell", "your new story",
    # added for stage 10: references to the text still to be written that do not say "story"
    "your answer", "your reply", "the next text", "the next part", "the rest of the text",
    "the next page", "the words you write now", "the next paragraph", "the next chapter",
    "the piece you write", "the lines you write", "the next bit", "the text after this one",
    "your next paragraph", "the story you tell now", "your own story", "the next few lines",
)
# {S}: a story phrase; {X}: "{a_word}" or "the word {word}" (always the latter where {X} starts
# the sentence, which must begin with a capital letter).
GRAMMAR_COMMANDS: tuple[str, ...] = (
    "put {X} in {S}", "use {X} in {S}", "include {X} in {S}", "mention {X} in {S}", "add {X} to {S}",
    "write about {X} in {S}", "talk about {X} in {S}", "show {X} in {S}", "place {X} in {S}",
    "make {S} about {X}", "write {S} about {X}", "begin {S} with {X}",
    "start {S} with {X}", "let {S} have {X} in it",
    "remember {X} in {S}", "do not forget {X} in {S}", "don't forget to use {X} in {S}",
    "be sure to put {X} in {S}", "make sure {S} has {X}", "tell {S} about {X}",
    # added for stage 10: more verbs of putting a word into the text
    "fit {X} into {S}", "squeeze {X} into {S}", "sneak {X} into {S}", "tuck {X} into {S}",
    "insert {X} into {S}", "drop {X} into {S}", "write {X} into {S}", "work {X} into {S}",
    "hide {X} in {S}", "build {S} around {X}", "center {S} on {X}", "fill {S} with {X}",
    "say {X} in {S}", "give {S} {X}", "let {X} be in {S}", "have {S} mention {X}",
)
GRAMMAR_STATEMENTS: tuple[str, ...] = (
    "{S} must include {X}", "{S} has to have {X}", "{S} should mention {X}", "{S} needs {X} in it",
    "{S} is to include {X}", "{S} will be about {X}", "{S} must be about {X}", "{S} has to use {X}",
    "{S} should talk about {X}", "{S} is about {X}", "{S} should have {X} in it",
    "{X} must be in {S}", "{X} goes in {S}", "{X} has to be in {S}", "{X} belongs in {S}",
    # added for stage 10
    "{S} contains {X}", "{S} gets {X}", "{S} can't do without {X}", "{S} is not done without {X}",
    "there must be {X} in {S}", "there should be {X} in {S}", "{X} is the word for {S}",
    "{X} should turn up in {S}",
)
GRAMMAR_REQUESTS: tuple[str, ...] = (
    "can you put {X} in {S}?", "would you include {X} in {S}?", "will you write {S} about {X}?",
    "can {S} have {X} in it?", "I would like {X} in {S}.", "I need {S} to have {X}.",
    "we want {S} to include {X}.", "please use {X} in {S}.", "my request is {X} in {S}.",
    "I ask you to mention {X} in {S}.", "you must put {X} in {S}.", "you should use {X} in {S}.",
    # added for stage 10
    "would you mind putting {X} in {S}?", "how about {X} in {S}?", "may {S} have {X}?",
    "I want {X} in {S}.", "I'd love {S} to include {X}.", "can you fit {X} into {S}?",
    "is it okay to add {X} to {S}?", "why not put {X} in {S}?",
)
GRAMMAR_ENDINGS: tuple[str, ...] = (".", ".", ".", ", please.", " now.", "!", ", okay?")

# The distinctive wording of each held-out phrasing. No training phrasing (template or grammar
# draw) contains one of these, so a held-out phrasing is new wording, not a recombination of
# trained parts.
HELDOUT_MARKERS: tuple[str, ...] = (
    "from now on", "every story you tell", "feature", "what you just read", "right away",
    "appear", "listen carefully", "the following story", "needs to name", "task for you",
    "coming story", "leave out", "when you continue", "new rule", "bring in", "at the start",
    "story that follows", "all about", "could you make", "part of", "tale", "do this now",
    "what you write next", "drop the story", "the new one", "your job", "get the word",
    "upcoming",
)
